"""Property and unit tests for mm.token_sequence (the Python server_tokens)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mm.token_sequence import NULL_TOKEN, MediaChunk, TokenSequence

VOCAB = 6  # tokens 0..5: tiny vocab so text collisions between sequences are common

Part = list[int] | MediaChunk

text_runs = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6)
chunks = st.builds(
    MediaChunk,
    id=st.sampled_from(["a", "b", "c"]),
    n_tokens=st.integers(1, 4),
    n_pos=st.integers(1, 4),
)
parts_lists = st.lists(st.one_of(text_runs, chunks), max_size=8)


def build(parts: list[Part]) -> TokenSequence:
    seq = TokenSequence()
    for p in parts:
        if isinstance(p, MediaChunk):
            seq.add_media(p)
        else:
            seq.extend(p)
    return seq


def units(parts: list[Part]) -> list[int | MediaChunk]:
    """Reference view: one unit per text token, one unit per whole chunk."""
    out: list[int | MediaChunk] = []
    for p in parts:
        if isinstance(p, MediaChunk):
            out.append(p)
        else:
            out.extend(p)
    return out


def width(u: int | MediaChunk) -> int:
    return u.n_tokens if isinstance(u, MediaChunk) else 1


def ref_common_prefix(pa: list[Part], pb: list[Part]) -> int:
    n = 0
    for ua, ub in zip(units(pa), units(pb), strict=False):
        # chunks match as a whole unit (id, n_tokens, n_pos); text by value; never text==chunk
        if type(ua) is not type(ub) or ua != ub:
            break
        n += width(ua)
    return n


def ref_positions(parts: list[Part]) -> dict[int, int]:
    """KV position at every index that is not strictly inside a chunk."""
    pos: dict[int, int] = {}
    i = p = 0
    for u in units(parts):
        pos[i] = p
        i += width(u)
        p += u.n_pos if isinstance(u, MediaChunk) else 1
    pos[i] = p
    return pos


@st.composite
def seq_pairs(draw: st.DrawFn) -> tuple[list[Part], list[Part]]:
    """Two part lists sharing a random common prefix of parts, then (usually) diverging."""
    prefix = draw(parts_lists)
    return prefix + draw(parts_lists), prefix + draw(parts_lists)


def strictly_inside(seq: TokenSequence, i: int) -> bool:
    return any(s < i < s + c.n_tokens for s, c in seq.media())


# -- common_prefix -----------------------------------------------------------------------------


@given(seq_pairs())
def test_common_prefix_symmetric_bounded_equal(pair: tuple[list[Part], list[Part]]) -> None:
    a, b = build(pair[0]), build(pair[1])
    n = a.common_prefix(b)
    assert n == b.common_prefix(a)
    assert 0 <= n <= min(len(a), len(b))
    assert a.tokens[:n] == b.tokens[:n]


@given(seq_pairs())
def test_common_prefix_never_inside_chunk(pair: tuple[list[Part], list[Part]]) -> None:
    a, b = build(pair[0]), build(pair[1])
    n = a.common_prefix(b)
    assert not strictly_inside(a, n)
    assert not strictly_inside(b, n)


@given(seq_pairs())
def test_common_prefix_matches_reference(pair: tuple[list[Part], list[Part]]) -> None:
    a, b = build(pair[0]), build(pair[1])
    assert a.common_prefix(b) == ref_common_prefix(*pair)
    assert a.common_prefix(a.copy()) == len(a)


@given(seq_pairs())
def test_keep_first_lcp_makes_equal(pair: tuple[list[Part], list[Part]]) -> None:
    a, b = build(pair[0]), build(pair[1])
    n = a.common_prefix(b)
    a.keep_first(n)
    b.keep_first(n)
    assert a == b
    assert a.media() == b.media()
    assert a.n_pos == b.n_pos


# -- keep_first --------------------------------------------------------------------------------


@given(parts_lists, st.data())
def test_keep_first_inside_chunk_raises_unchanged(parts: list[Part], data: st.DataObject) -> None:
    seq = build(parts)
    wide = [(s, c) for s, c in seq.media() if c.n_tokens >= 2]
    if not wide:
        return
    s, c = data.draw(st.sampled_from(wide))
    cut = data.draw(st.integers(s + 1, s + c.n_tokens - 1))
    before = seq.copy()
    with pytest.raises(ValueError):
        seq.keep_first(cut)
    assert seq == before
    assert seq.media() == before.media()


@given(parts_lists, st.data())
def test_keep_first_drops_chunks_at_or_after_n(parts: list[Part], data: st.DataObject) -> None:
    seq = build(parts)
    cut = data.draw(st.sampled_from(sorted(ref_positions(parts))))  # every legal cut point
    orig = seq.copy()
    seq.keep_first(cut)
    assert len(seq) == cut
    assert seq.tokens == orig.tokens[:cut]
    assert seq.media() == [(s, c) for s, c in orig.media() if s < cut]
    assert all(s + c.n_tokens <= cut for s, c in seq.media())
    seq.validate(VOCAB)
    # the truncated sequence behaves like one built from scratch: appending works
    seq.append(0)
    assert seq[cut] == 0


@given(parts_lists)
def test_keep_first_out_of_range(parts: list[Part]) -> None:
    seq = build(parts)
    for bad in (-1, len(seq) + 1):
        with pytest.raises(ValueError):
            seq.keep_first(bad)


# -- segments, positions, validate ---------------------------------------------------------------


@given(parts_lists, st.data())
def test_segments_reconstruct(parts: list[Part], data: st.DataObject) -> None:
    seq = build(parts)
    start = data.draw(st.sampled_from(sorted(ref_positions(parts))))
    rebuilt = seq.copy()
    rebuilt.keep_first(start)  # the cached part; segments() must supply exactly the rest
    prev_text = False
    expect = start
    for at, seg in seq.segments(start):
        assert at == expect == len(rebuilt)
        if isinstance(seg, MediaChunk):
            rebuilt.add_media(seg)
            prev_text = False
        else:
            assert seg and not prev_text  # runs are non-empty and maximal
            assert NULL_TOKEN not in seg
            rebuilt.extend(seg)
            prev_text = True
        expect = len(rebuilt)
    assert rebuilt == seq
    assert rebuilt.media() == seq.media()


@given(parts_lists)
def test_segments_start_inside_chunk_raises(parts: list[Part]) -> None:
    seq = build(parts)
    for s, c in seq.media():
        for i in range(s + 1, s + c.n_tokens):
            with pytest.raises(ValueError):
                list(seq.segments(i))


@given(parts_lists)
def test_pos_at_matches_reference(parts: list[Part]) -> None:
    seq = build(parts)
    ref = ref_positions(parts)
    for i in range(len(seq) + 1):
        if i in ref:
            assert seq.pos_at(i) == ref[i]
        else:
            with pytest.raises(ValueError):
                seq.pos_at(i)
    assert seq.n_pos == ref[len(seq)]


@given(parts_lists)
def test_chunk_lookup(parts: list[Part]) -> None:
    seq = build(parts)
    covered = {i: (s, c) for s, c in seq.media() for i in range(s, s + c.n_tokens)}
    for i in range(len(seq) + 1):
        assert seq.chunk_containing(i) == covered.get(i)
        hit = covered.get(i)
        assert seq.chunk_at(i) == (hit[1] if hit and hit[0] == i else None)
        if i < len(seq):
            assert (seq[i] == NULL_TOKEN) == (i in covered)


@given(parts_lists, st.data())
def test_validate(parts: list[Part], data: st.DataObject) -> None:
    seq = build(parts)
    seq.validate(VOCAB)
    text_idx = [i for i in range(len(seq)) if seq[i] != NULL_TOKEN]
    if text_idx:
        top = max(seq[i] for i in text_idx)
        with pytest.raises(ValueError, match=f"token {top} at index"):
            seq.validate(top)  # the largest token is now out of vocab
    bad = seq.copy()
    bad.append(VOCAB)
    with pytest.raises(ValueError, match=f"index {len(seq)}"):
        bad.validate(VOCAB)


# -- unit tests --------------------------------------------------------------------------------


def test_different_images_same_size_do_not_match() -> None:
    a = TokenSequence([1, 2])
    a.add_media(MediaChunk("aaa", 4, 4))
    a.extend([3])
    b = TokenSequence([1, 2])
    b.add_media(MediaChunk("bbb", 4, 4))
    b.extend([3])
    assert a.tokens == b.tokens  # identical placeholders, different images
    assert a.common_prefix(b) == 2
    assert a != b


def test_same_image_different_n_tokens_do_not_match() -> None:
    a = TokenSequence([7])
    a.add_media(MediaChunk("x", 3, 3))
    b = TokenSequence([7])
    b.add_media(MediaChunk("x", 5, 5))
    assert a.common_prefix(b) == 1
    assert b.common_prefix(a) == 1


def test_same_image_matches_whole_chunk() -> None:
    a = TokenSequence([7])
    a.add_media(MediaChunk("x", 3, 2))
    a.extend([1, 2])
    b = a.copy()
    b.extend([9])
    assert a.common_prefix(b) == 6
    assert b.pos_at(6) == 5


def test_prefix_shorter_than_chunk_stops_at_chunk_start() -> None:
    a = TokenSequence([1])
    a.add_media(MediaChunk("x", 4, 4))
    b = TokenSequence([1])
    b.add_media(MediaChunk("x", 2, 2))
    b.add_media(MediaChunk("x", 2, 2))  # same NULL run, different chunking
    assert a.common_prefix(b) == 1


def test_cut_inside_image_raises() -> None:
    seq = TokenSequence([1, 2])
    seq.add_media(MediaChunk("img", 3, 3))
    before = seq.copy()
    for n in (3, 4):
        with pytest.raises(ValueError, match="media chunk"):
            seq.keep_first(n)
    assert seq == before
    seq.keep_first(2)
    assert seq == TokenSequence([1, 2])
    assert not seq.has_media


def test_negative_tokens_rejected() -> None:
    with pytest.raises(ValueError):
        TokenSequence([1, -1])
    seq = TokenSequence([1])
    with pytest.raises(ValueError):
        seq.append(NULL_TOKEN)
    with pytest.raises(ValueError):
        seq.extend([2, 3, -5])
    assert seq.tokens == (1,)  # nothing appended on error


def test_media_chunk_validation() -> None:
    for args in (("", 1, 1), ("a", 0, 1), ("a", 1, 0)):
        with pytest.raises(ValueError):
            MediaChunk(*args)


def test_text_tokens_rejects_media_overlap() -> None:
    seq = TokenSequence([1, 2])
    seq.add_media(MediaChunk("img", 2, 1))
    seq.extend([3, 4])
    assert seq.text_tokens(0, 2) == [1, 2]
    assert seq.text_tokens(4) == [3, 4]
    for start, end in ((0, 3), (1, 5), (3, 4), (0, None)):
        with pytest.raises(ValueError):
            seq.text_tokens(start, end)


def test_validate_detects_broken_invariants() -> None:
    seq = TokenSequence([1, 2, 3])
    seq._tokens[1] = NULL_TOKEN  # stray placeholder with no chunk  # noqa: SLF001
    with pytest.raises(ValueError, match="NULL placeholder at index 1"):
        seq.validate(VOCAB)
    seq = TokenSequence([1])
    seq.add_media(MediaChunk("img", 2, 2))
    seq._tokens[2] = 0  # chunk range no longer all placeholders  # noqa: SLF001
    with pytest.raises(ValueError, match="media chunk at 1"):
        seq.validate(VOCAB)


def test_long_text_prefix() -> None:
    base = list(range(10_000))
    a = TokenSequence(base)
    b = TokenSequence(base[:7_777] + [0] + base[7_778:])
    assert a.common_prefix(b) == 7_777
    assert a.common_prefix(TokenSequence(base + [5])) == 10_000
    assert TokenSequence().common_prefix(a) == 0


def test_same_image_different_n_pos_do_not_match() -> None:
    # Stricter than id + n_tokens on purpose: a different n_pos shifts every later KV position.
    a = TokenSequence([7])
    a.add_media(MediaChunk("x", 4, 2))
    b = TokenSequence([7])
    b.add_media(MediaChunk("x", 4, 4))
    assert a.common_prefix(b) == 1
