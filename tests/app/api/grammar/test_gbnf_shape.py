"""Reading a GBNF text as llama.cpp's parser does, and measuring what it would build: nesting,
repetitions written out, chains of rules, the stacks a step fans out to."""

from __future__ import annotations

import json

import pytest
from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.api.grammar.gbnf_shape import MAX_DEPTH, GbnfError, gbnf_shape


def test_everyday_grammars_are_read_and_small():
    for text in (JSON_GBNF, 'root ::= "yes" | "no"\n', 'root ::= [0-9]{1,15} ("." [0-9]+)?'):
        shape = gbnf_shape(text)
        assert shape.depth < 5 and shape.chain < 10 and shape.leads < 20
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 1000}}}
    made = gbnf_shape(json_schema_to_gbnf(json.dumps(schema)))
    assert made.depth == 1000 <= MAX_DEPTH  # the converter writes maxLength as nested groups


def test_llama_cpps_syntax_is_read():
    text = (
        "# a comment\n"
        'root ::= item ( "," item )* # and another\n'
        'item ::= [a-z\\]\\-] | "\\x41\\u00e9\\t" | <[12]> | !<think> | . | ( \n'
        '  "multi" \n  | "line" )\n'
        'root2 ::= "a"{2} "b"{0,3} "c"{1,} ""\r\n'
    )
    shape = gbnf_shape(text)
    assert shape.repeats == 2 + 3 + 1 and shape.largest_repeat == 3


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('root ::= "abc', "unexpected end of input"),
        ('root ::= "\\q"', "unknown escape"),
        ('root ::= "\\x4"', "expecting 2 hex"),
        ("root ::= *", "expecting an item before a repetition"),
        ('root ::= ""*', "expecting an item before a repetition"),
        ('root ::= "a"\n | "b"', "expecting a rule name"),
        ('root ::= ( "a"', "expecting '\\)'"),
        ('root ::= "a" )', "expecting a newline"),
        ('root ::= "a"{2', "expecting '}'"),
        ('x ::= "a"', "no 'root' rule"),
        ("root ::= y", "'y' is used but not defined"),
        ('root ::= root "x" | "y"', "left recursion"),
        # Left recursion through a rule that matches nothing: llama.cpp misses it, and its
        # stacks then grow without end.
        ('root ::= a root "x" | "y"\na ::= b\nb ::= ""', "left recursion"),
    ],
)
def test_what_llama_cpp_refuses_is_refused(text: str, words: str):
    with pytest.raises(GbnfError, match=words):
        gbnf_shape(text)


def test_nesting_past_the_stack_is_refused_at_once():
    assert gbnf_shape("root ::= " + "(" * 1000 + '"a"' + ")" * 1000).depth == 1000
    with pytest.raises(GbnfError, match="nested more than 1024 deep"):
        gbnf_shape("root ::= " + "(" * 100_000 + '"a"' + ")" * 100_000)


def test_chains_of_rules_that_begin_with_rules_are_measured():
    def chain(n: int) -> str:
        rules = "".join(f'r{i} ::= r{i + 1} "x"\n' for i in range(n))
        return f'root ::= r0\n{rules}r{n} ::= "a"\n'

    assert gbnf_shape(chain(100)).chain == 102
    with pytest.raises(GbnfError, match="rules begin with rules more than 1024 deep"):
        gbnf_shape(chain(5000))
    # A rule that matches nothing lets the next one begin the sequence too.
    assert gbnf_shape('root ::= e a\ne ::= "" | "z"\na ::= b\nb ::= "x"').chain == 3


def test_rules_of_alternatives_that_begin_with_rules_multiply_the_stacks():
    def fan(levels: int) -> str:
        rules = "".join(f'r{i} ::= r{i + 1} | r{i + 1} "a"\n' for i in range(levels))
        return f'root ::= r0\n{rules}r{levels} ::= "b"\n'

    assert gbnf_shape(fan(10)).leads == 1024
    assert gbnf_shape(fan(60)).leads == 1 << 40  # counted up to a cap, never a huge number
    # From any position, not only the start: after "x" the fan-out begins.
    assert gbnf_shape(fan(10).replace("root ::= r0", 'root ::= "x" r0')).leads == 1024


def test_repetitions_are_counted_as_written_out():
    shape = gbnf_shape('root ::= "abcd"{2000}')
    assert shape.repeats == shape.largest_repeat == 2000
    assert shape.expanded == 2000 * 4  # four characters, two thousand copies
    nested = gbnf_shape('root ::= ("ab"{3}){5}')
    assert nested.repeats == 8 and nested.expanded == 3 * 2 + 5 * 1
