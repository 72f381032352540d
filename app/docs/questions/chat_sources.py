"""Retrieved chunks for chats and sessions (`"rag": {...}` on a chat request).

The chunks go into the new user message, as a first text part (marked with its `citations`)
before the user's own text: a session's history then stays one growing prefix, and later turns
cite a chunk that is already in the conversation by its number instead of repeating it. Chunks
are listed in canonical order (document, ordinal), so the same set reads the same every time.
"""

from __future__ import annotations

from typing import Any

from app.chat.turn_sources import Citation
from app.db.documents.document_records import ChunkRecord
from app.docs.questions.doc_prompt import INSTRUCTION, QUESTION
from rag.layout import chunk_text


def citation(c: ChunkRecord, score: float) -> Citation:
    """A chunk as replies cite it; `index` is the number its header carries in the prompt."""
    return Citation(
        c.number, c.id, c.document_id, c.filename, c.page, c.char_start, c.char_end, score, c.text
    )


def cited_before(history: list[Any]) -> tuple[set[str], set[str]]:
    """(chunk ids, document ids) that earlier user messages of the conversation already hold."""
    chunks: set[str] = set()
    documents: set[str] = set()
    for content in history:
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    for c in part.get("citations") or ():
                        chunks.add(c["chunk_id"])
                        documents.add(c["document_id"])
    return chunks, documents


def sources_part(
    found: list[tuple[ChunkRecord, float]], seen: set[str]
) -> tuple[dict[str, Any], list[Citation]]:
    """The text part holding the chunks (new ones in full, earlier ones by number) and the
    citations of all of them, in prompt order."""
    ordered = sorted(found, key=lambda cs: (cs[0].document_id, cs[0].ordinal))
    citations = [citation(c, s) for c, s in ordered]
    old = [c for c in citations if c.chunk_id in seen]
    text = INSTRUCTION
    if old:
        text += "Sources " + ", ".join(f"[{c.index}]" for c in old) + " above.\n\n"
    for c, _ in ordered:
        if f"chunk-{c.id}" not in seen:
            text += chunk_text(c.number, c.filename, c.page, c.text)
    text += QUESTION
    stored = [c.as_json() for c in citations]  # the part is stored with the message
    return {"type": "text", "text": text, "citations": stored}, citations
