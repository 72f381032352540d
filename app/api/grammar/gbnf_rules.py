"""A GBNF grammar as rules of items (what app/api/grammar/gbnf_shape.py reads), and the two
measures of it that cost llama.cpp more than its length: the longest chain of rules that each
begin with the next, and the most stacks one step of the grammar fans out to.

llama.cpp's `llama_grammar_advance_stack` expands a rule at the top of a stack into one stack
per alternative, and the rules those begin with likewise, one level per rule: a chain of n such
rules builds stacks n deep, and rules of two alternatives each that begin with the next double
the stacks at every level. A rule that can match nothing lets the next item begin the sequence
too. Both measures follow that, in time linear in the grammar; a rule that begins with itself
(left recursion, which llama.cpp refuses, and misses where the way back is through a rule that
matches nothing) is refused here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

TERM, REF, EMPTY = 0, 1, 2  # an item: characters, a rule or group, or "" (nothing)
CAP = 1 << 40  # counts stop growing here: they are compared with small limits


class GbnfError(ValueError):
    """A grammar llama.cpp's parser would refuse, or one too deep to measure."""


@dataclass(slots=True)
class Item:
    kind: int
    ref: int = -1  # the rule or group of a REF
    size: int = 1  # elements llama.cpp writes for it, repetitions written out
    copies: int = 1  # how many times a repetition writes it (llama.cpp copies the item)
    optional: bool = False  # a repetition that allows none of it


@dataclass(slots=True)
class Node:
    """A rule or a group: its alternatives, each a sequence of items."""

    alts: list[list[Item]] = field(default_factory=lambda: [[]])


@dataclass(slots=True, frozen=True)
class RuleMeasures:
    chain: int  # longest chain of rules each beginning with the next
    leads: int  # most stacks one step can fan out to


def measure(nodes: list[Node], max_depth: int) -> RuleMeasures:
    """The chain and the fan-out of the rules; GbnfError for left recursion or a chain longer
    than `max_depth` (llama.cpp recurses once per link)."""
    nullable = _nullable(nodes)
    chain = [0] * len(nodes)
    leads = [0] * len(nodes)
    state = [0] * len(nodes)  # 0: not seen, 1: on the path being walked, 2: measured
    for start in range(len(nodes)):
        if state[start]:
            continue
        state[start] = 1
        path = [(start, _leading_refs(nodes[start], nullable))]
        while path:
            node, refs = path[-1]
            for ref in refs:
                if state[ref] == 1:
                    raise GbnfError("a rule begins with itself (left recursion)")
                if state[ref] == 0:
                    if len(path) >= max_depth:
                        raise GbnfError(f"rules begin with rules more than {max_depth} deep")
                    state[ref] = 1
                    path.append((ref, _leading_refs(nodes[ref], nullable)))
                    break
            else:
                path.pop()
                state[node] = 2
                chain[node], leads[node] = _node_measures(nodes[node], nullable, chain, leads)
                if chain[node] > max_depth:
                    raise GbnfError(f"rules begin with rules more than {max_depth} deep")
    most = max((_suffix_leads(alt, nullable, leads) for n in nodes for alt in n.alts), default=1)
    return RuleMeasures(max(chain, default=0), most)


def _item_nullable(item: Item, nullable: list[bool]) -> bool:
    if item.kind == EMPTY or item.optional:
        return True
    return item.kind == REF and nullable[item.ref]


def _item_leads(item: Item, nullable: list[bool], leads: list[int]) -> int:
    if item.kind == EMPTY:
        return 0
    if item.kind == TERM:
        return 1
    # Copies of a rule that can match nothing each begin the sequence in turn.
    return min(leads[item.ref] * (item.copies if nullable[item.ref] else 1), CAP)


def _leading_refs(node: Node, nullable: list[bool]) -> Iterator[int]:
    """The rules and groups a node's alternatives begin with (through items that can match
    nothing)."""
    for alt in node.alts:
        for item in alt:
            if item.kind == REF:
                yield item.ref
            if not _item_nullable(item, nullable):
                break


def _node_measures(
    node: Node, nullable: list[bool], chain: list[int], leads: list[int]
) -> tuple[int, int]:
    longest, total = 0, 0
    for alt in node.alts:
        for item in alt:
            if item.kind == REF:
                longest = max(longest, chain[item.ref])
            total += _item_leads(item, nullable, leads)
            if not _item_nullable(item, nullable):
                break
        else:  # the whole alternative can match nothing: the stack goes on below it
            total += 1
    return longest + 1, min(total, CAP)


def _suffix_leads(alt: list[Item], nullable: list[bool], leads: list[int]) -> int:
    """The most stacks a step from any position of the sequence fans out to."""
    most, after = 1, 1  # from the end: the stack goes on below it
    for item in reversed(alt):
        here = _item_leads(item, nullable, leads)
        after = min(here + after, CAP) if _item_nullable(item, nullable) else here
        most = max(most, after)
    return most


def _nullable(nodes: list[Node]) -> list[bool]:
    """Which rules and groups can match nothing, in one pass over every item: each alternative
    counts the items it still waits for, and a rule found to match nothing counts down the
    alternatives it stands in."""
    waiting: list[int] = []  # per alternative: its items not yet known to match nothing
    owner: list[int] = []  # per alternative: its rule or group
    stands_in: list[list[int]] = [[] for _ in nodes]  # rule -> the alternatives it is in
    nullable = [False] * len(nodes)
    found: list[int] = []
    for i, node in enumerate(nodes):
        for alt in node.alts:
            a = len(waiting)
            owner.append(i)
            n = 0
            for item in alt:
                if item.kind == EMPTY or item.optional:
                    continue
                if item.kind == TERM:
                    n = CAP  # characters: never nothing
                    break
                n += 1
                stands_in[item.ref].append(a)
            waiting.append(n)
            if n == 0 and not nullable[i]:
                nullable[i] = True
                found.append(i)
    while found:
        for a in stands_in[found.pop()]:
            waiting[a] -= 1
            if waiting[a] == 0 and not nullable[owner[a]]:
                nullable[owner[a]] = True
                found.append(owner[a])
    return nullable
