"""`Bm25Index`: keyword search over one collection's chunk texts (bm25s), by chunk id.

bm25s is imported on first use: it brings scipy, which every server start would otherwise load,
documents or not (docs/development.md, "How long a fresh machine takes")."""

from __future__ import annotations


class Bm25Index:
    def __init__(self, ids: list[int], texts: list[str]) -> None:
        import bm25s

        self._ids = list(ids)
        self._bm25 = bm25s.BM25()
        if self._ids:
            self._bm25.index(
                bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False
            )

    def search(
        self, query: str, k: int, allowed: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Up to k (chunk id, score) pairs with a positive score, best first."""
        if not self._ids or k <= 0:
            return []
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self._bm25.retrieve(tokens, k=len(self._ids), show_progress=False)
        out = []
        for i, s in zip(docs[0], scores[0], strict=True):
            chunk_id = self._ids[int(i)]
            if s > 0 and (allowed is None or chunk_id in allowed):
                out.append((chunk_id, float(s)))
                if len(out) == k:
                    break
        return out
