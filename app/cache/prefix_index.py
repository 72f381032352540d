"""Radix tree over every reusable KV source, to find which one shares the longest prompt prefix.

This is an SGLang-style radix tree, except that its leaves are not KV pages but *sources*: any
hashable key naming a place whose KV holds a token sequence (a slot, a host-memory copy, ...).
Each source holds one sequence under one tenant salt. There is a separate root per salt, so a
prefix cached under one salt is never offered to a request under another (tenant isolation).

The tree is keyed by *units*: a text token is one unit (the int itself); a media chunk is one
unit ``(id, n_tokens, n_pos)`` that spans ``n_tokens`` tokens. Matching whole units only is what
``TokenSequence.common_prefix`` does, so ``match`` agrees with it exactly.

Invariants (``check`` asserts them all):
  * a non-root node has a non-empty edge label and is keyed in its parent by the label's first
    unit; ``depth`` is the token depth at the end of its edge;
  * ``node.sources`` is exactly the set of sources whose sequence covers the node's whole edge,
    ``node.ends`` those of them ending exactly at its end; so sources == ends + (disjoint) union
    of the children's sources, and no non-root node is empty (it would be pruned);
  * path compression: no non-root node has exactly one child and no source ending at it;
  * the root of a salt exists only while some source lives under that salt.
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Iterator
from typing import Generic, TypeVar

from mm.token_sequence import TokenSequence

S = TypeVar("S", bound=Hashable)
Unit = int | tuple[str, int, int]


def _units(seq: TokenSequence) -> list[Unit]:
    units: list[Unit] = []
    for _, part in seq.segments():
        if isinstance(part, list):
            units.extend(part)
        else:
            units.append((part.id, part.n_tokens, part.n_pos))
    return units


def _ntok(units: list[Unit]) -> int:
    return sum(1 if type(u) is int else u[1] for u in units)  # type: ignore[index]


def _mismatch(label: list[Unit], units: list[Unit], i: int) -> int:
    """Number of leading units of ``label`` equal to ``units[i:]``."""
    rest = units[i : i + len(label)]
    if rest == label:
        return len(label)
    k = 0
    for a, b in zip(label, rest, strict=False):
        if a != b:
            break
        k += 1
    return k


class _Node(Generic[S]):
    __slots__ = ("label", "parent", "depth", "children", "sources", "ends")

    def __init__(self, label: list[Unit], parent: _Node[S] | None, depth: int) -> None:
        self.label = label
        self.parent = parent
        self.depth = depth
        self.children: dict[Unit, _Node[S]] = {}
        self.sources: set[S] = set()
        self.ends: set[S] = set()


class _Entry(Generic[S]):
    __slots__ = ("salt", "end", "stamp")

    def __init__(self, salt: str, end: _Node[S], stamp: int) -> None:
        self.salt = salt
        self.end = end  # the node at which the source's sequence ends; its length is end.depth
        self.stamp = stamp  # insertion order, for a deterministic tie-break in best()


class PrefixIndex(Generic[S]):
    """Which sources hold which sequence, and which share the longest prefix with a prompt."""

    def __init__(self) -> None:
        self._roots: dict[str, _Node[S]] = {}
        self._entries: dict[S, _Entry[S]] = {}
        self._stamp = 0

    def __contains__(self, source: object) -> bool:
        return source in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def length(self, source: S) -> int:
        entry = self._entries.get(source)
        return 0 if entry is None else entry.end.depth

    # -- mutation -------------------------------------------------------------------------

    def set(self, source: S, salt: str, seq: TokenSequence) -> None:
        units = _units(seq)
        old = self._entries.get(source)
        if old is None:
            self._stamp += 1
            stamp = self._stamp
        else:
            stamp = old.stamp  # replacing a source keeps its place in the tie-break order
            self.remove(source)
        node = self._roots.get(salt)
        if node is None:
            node = self._roots[salt] = _Node([], None, 0)
        i, n = 0, len(units)
        while i < n:
            child = node.children.get(units[i])
            if child is None:  # nothing shares the rest: one new leaf holds it all
                child = node.children[units[i]] = _Node(units[i:], node, len(seq))
                i = n
            else:
                k = _mismatch(child.label, units, i)
                if k < len(child.label):  # diverges or ends inside the edge: end it there
                    child = self._split(child, k)
                i += k
            child.sources.add(source)
            node = child
        node.ends.add(source)
        self._entries[source] = _Entry(salt, node, stamp)

    def truncate(self, source: S, n_tokens: int) -> None:
        entry = self._entries[source]
        if not 0 <= n_tokens <= entry.end.depth:
            raise ValueError(f"truncate({n_tokens}) out of range for length {entry.end.depth}")
        # Find the node whose edge holds the cut, and validate it, before changing anything.
        target = entry.end
        while target.parent is not None and target.parent.depth >= n_tokens:
            target = target.parent
        k = 0
        if target.parent is not None and n_tokens < target.depth:
            d = target.parent.depth
            while d < n_tokens:
                d += _ntok(target.label[k : k + 1])
                k += 1
            if d != n_tokens:
                raise ValueError(f"truncate({n_tokens}) would cut a media chunk in half")
        node = entry.end
        node.ends.discard(source)
        while node is not target:
            parent = node.parent
            node.sources.discard(source)
            self._tidy(node)
            node = parent  # type: ignore[assignment]
        if k:  # the cut falls inside target's edge: split so the source ends at a node
            mid = self._split(target, k)
            target.sources.discard(source)
            self._tidy(target)
            target = mid
        target.ends.add(source)
        entry.end = target

    def remove(self, source: S) -> None:
        entry = self._entries.pop(source, None)
        if entry is None:
            return
        node = entry.end
        node.ends.discard(source)
        while node.parent is not None:
            parent = node.parent
            node.sources.discard(source)
            self._tidy(node)
            node = parent
        if not node.children and not node.ends:
            del self._roots[entry.salt]

    def _split(self, node: _Node[S], k: int) -> _Node[S]:
        """Cut node's edge after k units (0 < k < len); return the new upper node."""
        parent = node.parent
        assert parent is not None
        head, tail = node.label[:k], node.label[k:]
        mid: _Node[S] = _Node(head, parent, parent.depth + _ntok(head))
        mid.sources = set(node.sources)  # a copy: the two halves diverge from here on
        mid.children[tail[0]] = node
        parent.children[head[0]] = mid
        node.label, node.parent = tail, mid
        return mid

    def _tidy(self, node: _Node[S]) -> None:
        """Restore the invariants at a non-root node that has just lost a source."""
        parent = node.parent
        assert parent is not None
        if not node.sources:  # no source left: children are empty too (sources are nested)
            del parent.children[node.label[0]]
        elif len(node.children) == 1 and not node.ends:  # path compression: fold into child
            (child,) = node.children.values()
            child.label = node.label + child.label
            child.parent = parent
            parent.children[child.label[0]] = child

    # -- queries --------------------------------------------------------------------------

    def match(self, salt: str, seq: TokenSequence) -> dict[S, int]:
        node = self._roots.get(salt)
        if node is None:
            return {}
        units = _units(seq)
        out: dict[S, int] = {}
        i, n = 0, len(units)
        # Walk down once; a deeper node's sources are a subset of its parent's, so overwriting
        # leaves each source at the deepest point where it still agrees with seq.
        while i < n:
            child = node.children.get(units[i])
            if child is None:
                break
            k = _mismatch(child.label, units, i)
            if k < len(child.label):  # diverges inside the edge: its sources match up to there
                depth = node.depth + _ntok(child.label[:k])
                for s in child.sources:
                    out[s] = depth
                break
            for s in child.sources:
                out[s] = child.depth
            node, i = child, i + k
        return out

    def best(
        self, salt: str, seq: TokenSequence, exclude: Container[S] = ()
    ) -> tuple[S, int] | None:
        """Longest match; ties go to the source inserted first."""
        found: tuple[S, int] | None = None
        rank: tuple[int, int] | None = None
        for s, d in self.match(salt, seq).items():
            if s in exclude:
                continue
            r = (d, -self._entries[s].stamp)
            if rank is None or r > rank:
                found, rank = (s, d), r
        return found

    # -- invariants -----------------------------------------------------------------------

    def _iter_nodes(self) -> Iterator[_Node[S]]:
        """Every node, roots included."""
        stack = list(self._roots.values())
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.children.values())

    def check(self) -> None:
        def need(cond: bool, what: str) -> None:
            if not cond:  # not `assert`: must still run under python -O
                raise AssertionError(what)

        n_ends = 0
        for salt, root in self._roots.items():
            need(root.parent is None and not root.label and root.depth == 0, "bad root")
            need(not root.sources, "root holds sources")
            need(bool(root.children or root.ends), f"empty root for salt {salt!r}")
            n_ends += len(root.ends)
            stack = [root]
            while stack:
                node = stack.pop()
                below: set[S] = set()
                for key, child in node.children.items():
                    need(bool(child.label) and child.label[0] == key, "child keyed wrong")
                    need(child.parent is node, "parent link broken")
                    need(child.depth == node.depth + _ntok(child.label), "depth wrong")
                    need(bool(child.sources), "empty node")
                    need(not (len(child.children) == 1 and not child.ends), "not compressed")
                    need(child.ends <= child.sources, "ends not in sources")
                    need(not below & child.sources, "source on two branches")
                    below |= child.sources
                    n_ends += len(child.ends)
                    stack.append(child)
                if node.parent is not None:
                    need(node.sources == node.ends | below, "sources != ends + children")
        need(n_ends == len(self._entries), "ends do not match the entries")
        for source, entry in self._entries.items():
            need(source in entry.end.ends, "entry end node does not end it")
            node = entry.end
            while node.parent is not None:
                need(source in node.sources, "source missing on its path")
                node = node.parent
            need(self._roots.get(entry.salt) is node, "entry under the wrong root")
