"""A citation's JSON: the fields and their order the replies have always carried."""

from __future__ import annotations

from app.chat.turn_sources import Citation, citations_json


def test_a_citation_is_json_with_the_api_chunk_id_only_at_the_edge():
    c = Citation(2, 17, "doc-1", "a.txt", None, 5, 40, 0.5, "text")
    assert c.chunk_id == "chunk-17"
    assert list(c.as_json().items()) == [
        ("index", 2),
        ("chunk_id", "chunk-17"),
        ("document_id", "doc-1"),
        ("filename", "a.txt"),
        ("page", None),
        ("char_start", 5),
        ("char_end", 40),
        ("score", 0.5),
        ("text", "text"),
    ]
    assert citations_json([c, c]) == [c.as_json(), c.as_json()]
