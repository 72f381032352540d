"""Tests for app.cache.prefix_index: unit cases plus a stateful check against brute force."""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from app.cache.prefix_index import PrefixIndex
from mm.token_sequence import MediaChunk, TokenSequence

Item = int | MediaChunk


def add(seq: TokenSequence, items: list[Item] | tuple[Item, ...]) -> TokenSequence:
    for it in items:
        if isinstance(it, MediaChunk):
            seq.add_media(it)
        else:
            seq.append(it)
    return seq


def seq_of(*items: Item) -> TokenSequence:
    return add(TokenSequence(), items)


def img(id_: str, n: int, n_pos: int | None = None) -> MediaChunk:
    return MediaChunk(id_, n, n if n_pos is None else n_pos)


def n_nodes(index: PrefixIndex) -> int:
    """Non-root nodes."""
    return sum(1 for node in index._iter_nodes() if node.parent is not None)  # noqa: SLF001


def inside(seq: TokenSequence) -> list[int]:
    """Indices strictly inside a media chunk: never a valid cut."""
    return [s + j for s, c in seq.media() for j in range(1, c.n_tokens)]


def cuts(seq: TokenSequence) -> list[int]:
    """Every length seq can be truncated to."""
    bad = set(inside(seq))
    return [i for i in range(len(seq) + 1) if i not in bad]


# -- unit cases ---------------------------------------------------------------------------


def test_split_on_divergence_inside_edge() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "", seq_of(1, 2, 3, 4))
    assert n_nodes(index) == 1
    index.set("b", "", seq_of(1, 2, 5))
    index.check()
    assert n_nodes(index) == 3  # [1, 2] -> {[3, 4], [5]}
    assert index.match("", seq_of(1, 2, 3, 9)) == {"a": 3, "b": 2}
    assert index.match("", seq_of(1, 9)) == {"a": 1, "b": 1}
    assert index.match("", seq_of(7)) == {}
    assert index.best("", seq_of(1, 2, 5, 6)) == ("b", 3)


def test_source_ending_inside_edge() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "", seq_of(1, 2, 3, 4))
    index.set("b", "", seq_of(1, 2))
    index.check()
    assert n_nodes(index) == 2  # [1, 2] ends b, then [3, 4]
    assert index.length("b") == 2
    assert index.match("", seq_of(1, 2, 3, 4, 5)) == {"a": 4, "b": 2}
    assert index.match("", seq_of(1)) == {"a": 1, "b": 1}


def test_salts_isolate() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "x", seq_of(1, 2, 3))
    assert index.match("y", seq_of(1, 2, 3)) == {}
    assert index.best("y", seq_of(1, 2, 3)) is None
    index.set("b", "y", seq_of(1, 2))
    index.check()
    assert index.match("y", seq_of(1, 2, 3)) == {"b": 2}
    assert index.match("x", seq_of(1, 2, 3)) == {"a": 3}


def test_set_replaces_and_can_move_salt() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "x", seq_of(1, 2))
    index.set("a", "y", seq_of(1, 3))
    index.check()
    assert len(index) == 1
    assert index.match("x", seq_of(1, 2)) == {}
    assert index.match("y", seq_of(1, 3)) == {"a": 2}
    assert list(index._roots) == ["y"]  # noqa: SLF001 (white-box test of the unit's state)


def test_media_unit_matched_whole() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "", seq_of(1, img("a", 2), 3))
    assert index.match("", seq_of(1, img("a", 2), 3)) == {"a": 4}
    assert index.match("", seq_of(1, img("a", 2))) == {"a": 3}
    assert index.match("", seq_of(1, img("a", 3), 3)) == {"a": 1}  # same id, other size
    assert index.match("", seq_of(1, img("a", 2, 1), 3)) == {"a": 1}  # other n_pos
    assert index.match("", seq_of(1, img("b", 2), 3)) == {"a": 1}
    assert index.match("", seq_of(img("a", 2))) == {}
    index.set("b", "", seq_of(1, img("a", 3)))  # splits right after the text token
    index.check()
    assert index.match("", seq_of(1, img("a", 3), 5)) == {"a": 1, "b": 4}


def test_truncate() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "", seq_of(1, img("a", 3), 2))
    index.set("b", "", seq_of(1, img("a", 3), 2, 7))
    for bad in (2, 3, 6, -1):  # inside the chunk, or out of range
        with pytest.raises(ValueError):
            index.truncate("a", bad)
        index.check()
        assert index.length("a") == 5
    with pytest.raises(KeyError):
        index.truncate("zz", 0)
    index.truncate("b", 4)  # cut inside the shared edge, right after the chunk
    index.check()
    assert index.match("", seq_of(1, img("a", 3), 2)) == {"a": 5, "b": 4}
    index.truncate("a", 1)
    index.check()
    assert index.match("", seq_of(1, img("a", 3), 2)) == {"a": 1, "b": 4}
    index.truncate("a", 0)
    index.check()
    assert "a" in index and index.length("a") == 0
    assert index.match("", seq_of(1)) == {"b": 1}


def test_remove_merges_and_prunes_to_empty() -> None:
    index: PrefixIndex[tuple[str, int]] = PrefixIndex()
    seqs = [seq_of(1, 2, 3), seq_of(1, 2, 4), seq_of(1, 2), seq_of(1, img("a", 2)), seq_of()]
    for i, seq in enumerate(seqs):
        index.set(("slot", i), "t" if i == 3 else "", seq)
        index.check()
    index.remove(("slot", 1))
    index.check()
    assert index.match("", seq_of(1, 2, 4)) == {("slot", 0): 2, ("slot", 2): 2}
    index.remove(("slot", 2))  # [1, 2] no longer ends anything: folds into [3]
    index.check()
    (node,) = index._roots[""].children.values()  # noqa: SLF001 (white-box)
    assert node.label == [1, 2, 3] and not node.children
    index.remove(("slot", 99))  # unknown: no-op
    for i in (0, 3, 4):
        index.remove(("slot", i))
        index.check()
    assert len(index) == 0 and index._roots == {} and n_nodes(index) == 0  # noqa: SLF001


def test_best_excludes_and_breaks_ties_by_insertion() -> None:
    index: PrefixIndex[str] = PrefixIndex()
    index.set("a", "", seq_of(1, 2))
    index.set("b", "", seq_of(1, 2))
    index.set("c", "", seq_of(1))
    index.set("a", "", seq_of(1, 2, 3))  # replaced: keeps its insertion rank
    assert index.best("", seq_of(1, 2)) == ("a", 2)
    assert index.best("", seq_of(1, 2), exclude={"a"}) == ("b", 2)
    assert index.best("", seq_of(1, 2), exclude={"a", "b"}) == ("c", 1)
    assert index.best("", seq_of(1, 2), exclude={"a", "b", "c"}) is None


# -- stateful comparison with a brute-force reference ---------------------------------------

SOURCES: list[Hashable] = [("slot", i) for i in range(3)] + [("host", i) for i in range(3)]
SALTS = ["", "t"]
# n_pos == n_tokens, plus one M-RoPE-like chunk that differs from ("a", 2, 2) only in n_pos.
chunks = st.builds(img, st.sampled_from(["a", "b"]), st.integers(1, 3)) | st.just(img("a", 2, 1))
items = st.lists(st.one_of(st.integers(0, 3), st.integers(0, 3), chunks), max_size=7)


class IndexMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.index: PrefixIndex[Hashable] = PrefixIndex()
        self.ref: dict[Hashable, tuple[str, TokenSequence]] = {}
        self.stamp: dict[Hashable, int] = {}
        self.n_set = 0

    def ref_match(self, salt: str, q: TokenSequence) -> dict[Hashable, int]:
        out = {s: seq.common_prefix(q) for s, (sa, seq) in self.ref.items() if sa == salt}
        return {s: n for s, n in out.items() if n > 0}

    def compare(self, salt: str, q: TokenSequence, exclude: frozenset = frozenset()) -> None:
        want = self.ref_match(salt, q)
        assert self.index.match(salt, q) == want
        left = {s: n for s, n in want.items() if s not in exclude}
        top = min(left, key=lambda s: (-left[s], self.stamp[s])) if left else None
        assert self.index.best(salt, q, exclude) == (None if top is None else (top, left[top]))

    def derived(self, data: st.DataObject) -> TokenSequence:
        """A prefix of a stored sequence, extended: the shapes that split edges."""
        _, base = self.ref[data.draw(st.sampled_from(sorted(self.ref)))]
        seq = base.copy()
        seq.keep_first(data.draw(st.sampled_from(cuts(seq))))
        return add(seq, data.draw(items))

    def do_set(self, source: Hashable, salt: str, seq: TokenSequence) -> None:
        if source not in self.ref:
            self.n_set += 1
            self.stamp[source] = self.n_set
        self.ref[source] = (salt, seq.copy())
        self.index.set(source, salt, seq)

    @rule(source=st.sampled_from(SOURCES), salt=st.sampled_from(SALTS), parts=items)
    def set_random(self, source: Hashable, salt: str, parts: list[Item]) -> None:
        self.do_set(source, salt, seq_of(*parts))

    @precondition(lambda self: self.ref)
    @rule(source=st.sampled_from(SOURCES), salt=st.sampled_from(SALTS), data=st.data())
    def set_derived(self, source: Hashable, salt: str, data: st.DataObject) -> None:
        self.do_set(source, salt, self.derived(data))

    @precondition(lambda self: self.ref)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        source = data.draw(st.sampled_from(sorted(self.ref)))
        seq = self.ref[source][1]
        n = data.draw(st.sampled_from(cuts(seq)))
        self.index.truncate(source, n)
        seq.keep_first(n)

    @precondition(lambda self: any(inside(seq) for _, seq in self.ref.values()))
    @rule(data=st.data())
    def truncate_inside_chunk(self, data: st.DataObject) -> None:
        bad = [(src, n) for src, (_, seq) in sorted(self.ref.items()) for n in inside(seq)]
        source, n = data.draw(st.sampled_from(bad))
        with pytest.raises(ValueError):
            self.index.truncate(source, n)

    @rule(source=st.sampled_from(SOURCES))
    def remove(self, source: Hashable) -> None:
        self.index.remove(source)
        self.ref.pop(source, None)
        self.stamp.pop(source, None)

    @precondition(lambda self: self.ref)
    @rule(salt=st.sampled_from(SALTS), data=st.data(), exclude=st.sets(st.sampled_from(SOURCES)))
    def query_derived(self, salt: str, data: st.DataObject, exclude: set[Hashable]) -> None:
        self.compare(salt, self.derived(data), frozenset(exclude))

    @rule(salt=st.sampled_from(SALTS), parts=items)
    def query_random(self, salt: str, parts: list[Item]) -> None:
        self.compare(salt, seq_of(*parts))

    @invariant()
    def agrees_with_reference(self) -> None:
        self.index.check()
        assert len(self.index) == len(self.ref)
        for s in SOURCES:
            assert (s in self.index) == (s in self.ref)
            assert self.index.length(s) == (len(self.ref[s][1]) if s in self.ref else 0)
        for _, seq in self.ref.values():
            longer = seq.copy()
            longer.append(0)
            shorter = seq.copy()
            shorter.keep_first(cuts(seq)[len(cuts(seq)) // 2])
            for q in (seq, longer, shorter):
                for salt in SALTS:
                    self.compare(salt, q)


IndexMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestIndexMachine = IndexMachine.TestCase
