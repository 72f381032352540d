"""The sources part of a `rag` message: typed citations for the turn, JSON in the stored part,
chunks an earlier message holds cited by number."""

from __future__ import annotations

from app.chat.turn_sources import Citation
from app.db.documents.document_records import ChunkRecord
from app.docs.questions.chat_sources import citation, cited_before, sources_part


def chunk(id: int, document: str, ordinal: int, number: int) -> ChunkRecord:
    return ChunkRecord(id, document, ordinal, number, f"text {id}", 0, 6, None, f"{document}.txt")


def test_citations_are_typed_for_the_turn_and_json_in_the_stored_part():
    a, b = chunk(7, "doc-b", 0, 1), chunk(3, "doc-a", 2, 2)
    part, citations = sources_part([(a, 0.9), (b, 0.4)], seen=set())
    assert citations == [citation(b, 0.4), citation(a, 0.9)]  # canonical order: document, ordinal
    assert all(isinstance(c, Citation) for c in citations)
    assert [c.chunk for c in citations] == [3, 7]
    assert part["citations"] == [c.as_json() for c in citations]
    assert "text 3" in part["text"] and "text 7" in part["text"]
    # What a later turn reads back from the stored message.
    assert cited_before([[part]]) == ({"chunk-3", "chunk-7"}, {"doc-a", "doc-b"})


def test_a_chunk_an_earlier_message_holds_is_cited_by_its_number():
    a, b = chunk(3, "doc-a", 0, 1), chunk(4, "doc-a", 1, 2)
    part, citations = sources_part([(a, 0.9), (b, 0.4)], seen={"chunk-3"})
    assert "Sources [1] above." in part["text"]
    assert "text 3" not in part["text"] and "text 4" in part["text"]
    assert [c.chunk_id for c in citations] == ["chunk-3", "chunk-4"]
