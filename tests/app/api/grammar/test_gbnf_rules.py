"""The rules' measures on hand-built rules: which match nothing, the longest chain of rules
that begin with rules, the stacks a step fans out to."""

from __future__ import annotations

import pytest

from app.api.grammar.gbnf_rules import CAP, EMPTY, REF, TERM, GbnfError, Item, Node, measure


def ref(node: int, **kw: object) -> Item:
    return Item(REF, node, **kw)  # type: ignore[arg-type]


def test_a_chain_through_rules_that_match_nothing_is_followed():
    # 0 ::= 1 2 "t"; 1 ::= "" ; 2 ::= 3 ; 3 ::= "t"
    nodes = [
        Node([[ref(1), ref(2), Item(TERM)]]),
        Node([[Item(EMPTY, size=0)]]),
        Node([[ref(3)]]),
        Node([[Item(TERM)]]),
    ]
    measures = measure(nodes, max_depth=10)
    assert measures.chain == 3  # 0 -> 2 -> 3 (1 matches nothing, so 2 begins too)
    assert measures.leads == 2  # 1 matching nothing (then 2 goes on), and 3 through 2


def test_copies_of_a_rule_that_can_match_nothing_each_begin_the_sequence():
    # 0 ::= 1{5} ; 1 ::= "a" | ""
    nodes = [Node([[ref(1, copies=5)]]), Node([[Item(TERM)], [Item(EMPTY, size=0)]])]
    assert measure(nodes, max_depth=10).leads == 2 * 5 + 1


def test_left_recursion_and_long_chains_are_refused():
    with pytest.raises(GbnfError, match="left recursion"):
        measure([Node([[ref(1)]]), Node([[ref(0), Item(TERM)]])], max_depth=10)
    chain = [Node([[ref(i + 1)]]) for i in range(20)] + [Node([[Item(TERM)]])]
    assert measure(chain, max_depth=21).chain == 21
    with pytest.raises(GbnfError, match="more than 20 deep"):
        measure(chain, max_depth=20)


def test_counts_stop_at_the_cap():
    nodes = [Node([[ref(i + 1)], [ref(i + 1), Item(TERM)]]) for i in range(50)]
    nodes.append(Node([[Item(TERM)]]))
    assert measure(nodes, max_depth=100).leads == CAP
