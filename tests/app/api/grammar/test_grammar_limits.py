"""The limits a request's grammar is held to: each refusal is a 400 that names the field and
the setting, and comes before any of the work it would have cost."""

from __future__ import annotations

import json

import pytest
from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.api.grammar.grammar_limits import MAX_LEADS, GrammarLimits, check_gbnf, check_schema
from app.engine.request import RequestError

LIMITS = GrammarLimits(max_bytes=128 << 10, max_repeat=10_000)


def refusal(call, *args) -> RequestError:  # noqa: ANN001
    with pytest.raises(RequestError) as e:
        call(*args)
    assert e.value.status == 400
    return e.value


def test_everyday_schemas_and_grammars_pass():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 200},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
            "kind": {"enum": ["a", "b", "c"]},
        },
        "required": ["name"],
    }
    assert check_schema(schema, LIMITS, "response_format") == 220
    check_gbnf(json_schema_to_gbnf(json.dumps(schema)), LIMITS, "response_format", made=True)
    check_gbnf(JSON_GBNF, LIMITS, "grammar")


def test_a_bound_of_billions_is_refused_without_being_written_out():
    # The converter would write three billion nested groups (tens of GB); this returns at once.
    schema = {"type": "string", "maxLength": 3_000_000_000}
    e = refusal(check_schema, schema, LIMITS, "response_format")
    assert e.param == "response_format"
    assert e.message == (
        "response_format: the schema asks for 3000000000 repetitions ($.maxLength is "
        "3000000000); this server takes at most 10000 repetitions (--grammar-max-repeat)"
    )


def test_the_tools_bounds_count_together():
    tool = {"type": "array", "minItems": 6000}
    spent = check_schema(tool, LIMITS, "tools[0].function.parameters")
    e = refusal(check_schema, tool, LIMITS, "tools[1].function.parameters", spent)
    assert e.param == "tools[1].function.parameters" and "12000 repetitions" in e.message


def test_size_is_limited_for_schemas_and_grammars():
    big = {"enum": ["x" * 1000] * 200}
    e = refusal(check_schema, big, LIMITS, "json_schema")
    assert "bytes; this server takes at most 131072 bytes (--grammar-max-bytes)" in e.message
    grammar = 'root ::= "' + "a" * 200_000 + '"'
    assert "the grammar has 200011 bytes" in refusal(check_gbnf, grammar, LIMITS, "grammar").message


def test_a_bad_bound_names_where_it_stands():
    e = refusal(check_schema, {"properties": {"a": {"maxItems": -3}}}, LIMITS, "json_schema")
    assert e.message == "json_schema: $.properties.a.maxItems must not be negative"


@pytest.mark.parametrize(
    ("grammar", "words"),
    [
        ("root ::= " + "(" * 2000 + '"a"' + ")" * 2000, "nested more than 1024 deep"),
        ('root ::= "a"{6000} "b"{6000}', "asks for 12000 repetitions"),
        ('root ::= "' + "a" * 100 + '"{2000}', "written out, repetitions included, has 200000"),
        ('root ::= root "x" | "y"', "left recursion"),
        ("root ::= x", "'x' is used but not defined"),
    ],
)
def test_grammars_llama_cpp_would_choke_on_are_refused(grammar: str, words: str):
    e = refusal(check_gbnf, grammar, LIMITS, "grammar")
    assert e.param == "grammar" and e.message.startswith("grammar: ") and words in e.message


def test_a_grammar_that_fans_out_past_the_limit_is_refused():
    rules = "".join(f'r{i} ::= r{i + 1} | r{i + 1} "a"\n' for i in range(13))
    e = refusal(check_gbnf, f'root ::= r0\n{rules}r13 ::= "b"\n', LIMITS, "grammar")
    assert "can begin 8192 ways" in e.message and f"the most is {MAX_LEADS}" in e.message


def test_a_made_grammar_says_it_was_made_from_the_schema():
    # Within --grammar-max-repeat, but written as groups nested deeper than llama.cpp can take.
    schema = {"type": "string", "maxLength": 1100}
    assert check_schema(schema, LIMITS, "response_format") == 1100
    grammar = json_schema_to_gbnf(json.dumps(schema))
    e = refusal(check_gbnf, grammar, LIMITS, "response_format", True)
    assert e.message.startswith(
        "response_format: the grammar made from the schema cannot be used: groups are nested"
    )
