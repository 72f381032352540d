"""Where a prompt holds stored chunks (`find_spans`): exact runs, sorted, never overlapping."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.engine.blend_plan import ChunkSpan, find_spans

tokens = st.lists(st.integers(0, 40), min_size=20, max_size=60)


def check(prompt: list[int], spans: list[ChunkSpan]) -> None:
    for s in spans:
        assert prompt[s.start : s.end] == list(s.tokens[s.offset : s.offset + s.length])
    for a, b in zip(spans, spans[1:], strict=False):
        assert a.end <= b.start


@settings(max_examples=200, deadline=None)
@given(head=st.lists(st.integers(100, 120), max_size=12), chunks=st.lists(tokens, max_size=4))
def test_chunks_laid_end_to_end_are_found_whole_where_they_are(head, chunks):
    # Distinct token ranges per chunk, as distinct texts give: each chunk occurs once.
    chunks = [[t + 1000 * (i + 1) for t in c] for i, c in enumerate(chunks)]
    prompt = [*head]
    starts = []
    for c in chunks:
        starts.append(len(prompt))
        prompt += c
    prompt += [7, 7, 7]
    spans = find_spans(prompt, [(f"d{i}", c) for i, c in enumerate(chunks)], min_span=1)
    check(prompt, spans)
    assert [(s.start, s.offset, s.length) for s in spans] == [
        (start, 0, len(c)) for start, c in zip(starts, chunks, strict=True)
    ]


@settings(max_examples=300, deadline=None)
@given(
    prompt=st.lists(st.integers(0, 5), max_size=80),
    chunks=st.lists(st.lists(st.integers(0, 5), max_size=30), max_size=5),
    min_span=st.integers(1, 8),
)
def test_any_prompt_gets_exact_sorted_disjoint_spans(prompt, chunks, min_span):
    spans = find_spans(prompt, [("d", c) for c in chunks], min_span=min_span)
    check(prompt, spans)
    assert all(s.length >= min_span for s in spans)


@settings(max_examples=100, deadline=None)
@given(
    chunk=st.lists(st.integers(1000, 2000), min_size=20, max_size=60, unique=True),
    cut=st.integers(1, 3),
)
def test_a_chunk_whose_edges_merged_with_its_neighbours_is_found_inside(chunk, cut):
    # The template tokenized the chunk's first and last tokens together with their neighbours.
    prompt = [1, 2, 3, 999, *chunk[cut:-cut], 998, 4]
    spans = find_spans(prompt, [("d", chunk)], min_span=1)
    assert [(s.start, s.offset, s.length) for s in spans] == [(4, cut, len(chunk) - 2 * cut)]


@given(length=st.integers(1, 40), pos=st.integers(0, 80))
def test_after_keeps_the_part_past_a_position(length, pos):
    span = ChunkSpan(10, "d", tuple(range(length)))
    rest = span.after(pos)
    assert rest.end == span.end
    assert rest.start == min(max(pos, span.start), span.end)
    assert rest.offset == rest.start - span.start
