"""`Chunker`: a document's text -> `Chunk`s of at most `chunk_tokens` chat-model tokens.

Splitting is semantic-text-splitter's (paragraphs, then sentences, then words; Markdown by its
structure), with sizes counted by a callback in the chat model's tokens. Invariants: chunks come
in text order with ordinals 0..n-1, and text[char_start:char_end] == chunk.text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from semantic_text_splitter import MarkdownSplitter, TextSplitter

from rag.loader import LoadedDocument

# all-MiniLM-L6-v2 reads at most 256 word pieces; chat-model tokens run close to word pieces on
# English prose, so 200 leaves room for the numbered header and tokenizer differences.
DEFAULT_CHUNK_TOKENS = 200
DEFAULT_OVERLAP_TOKENS = 20


@dataclass(slots=True)
class Chunk:
    ordinal: int
    text: str
    char_start: int
    char_end: int
    page: int | None


class Chunker:
    def __init__(
        self,
        count_tokens: Callable[[str], int],
        chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    ) -> None:
        if chunk_tokens < 8 or not 0 <= overlap_tokens < chunk_tokens:
            raise ValueError("chunk_tokens must be >= 8 and 0 <= overlap_tokens < chunk_tokens")
        self._text = TextSplitter.from_callback(count_tokens, chunk_tokens, overlap_tokens)
        self._markdown = MarkdownSplitter.from_callback(count_tokens, chunk_tokens, overlap_tokens)

    def split(self, doc: LoadedDocument) -> list[Chunk]:
        """Pages (when the format has them) are split on their own: a chunk never spans two
        pages, so its page number is exact."""
        splitter = self._markdown if doc.kind in ("markdown", "docx") else self._text
        bounds = [*doc.page_starts, len(doc.text)] if doc.page_starts else [0, len(doc.text)]
        chunks: list[Chunk] = []
        for page_start, page_end in zip(bounds, bounds[1:], strict=False):
            part = doc.text[page_start:page_end]
            for offset, piece in splitter.chunk_indices(part):  # character offsets
                start = page_start + offset
                end = start + len(piece)
                chunks.append(Chunk(len(chunks), piece, start, end, doc.page_at(start)))
        return chunks
