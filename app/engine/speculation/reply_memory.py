"""`ReplyMemory`: recent replies given on each document, a draft source for later questions.

Answers on the same documents copy the same passages (names, figures, sentences), so a reply
given earlier on a document is a good guess at what a new answer on it will write, even when
the new prompt retrieved other chunks; and the same question asked again (the end of the
prompt is kept before each reply, as context) agrees with its earlier answer from the first
token, a long match from the start. Keyed by tenant salt and document id: one tenant's
replies never draft another's (an accepted draft would be a timing signal). Bounded: the
newest `per_document` replies per document, the `max_documents` most recently used documents.
Engine thread only.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence

from app.engine.speculation.ngram_index import NgramIndex

Reply = tuple[frozenset[str], NgramIndex]


class ReplyMemory:
    def __init__(self, n: int, per_document: int = 8, max_documents: int = 256) -> None:
        self.n = n
        self.per_document = per_document
        self.max_documents = max_documents
        # (salt, document) -> (documents of the reply, its index), oldest first
        self._replies: OrderedDict[tuple[str, str], deque[Reply]] = OrderedDict()

    def add(
        self, salt: str, documents: frozenset[str], reply: list[int], lead: Sequence[int] = ()
    ) -> None:
        """Remember a finished reply on these documents (too short to draft from: ignored).
        `lead`: the end of its prompt (the question), kept before it as context only, so that the
        same question asked again agrees with it from the answer's first token."""
        if self.per_document <= 0 or len(reply) <= self.n or not documents:
            return
        index = NgramIndex(self.n, [*lead, *reply], lead=len(lead))
        index.seal()
        for doc in sorted(documents):
            key = (salt, doc)
            kept = self._replies.pop(key, None) or deque(maxlen=self.per_document)
            kept.append((documents, index))  # one index shared by every document of the reply
            self._replies[key] = kept
        while len(self._replies) > self.max_documents:
            self._replies.popitem(last=False)

    def replies(self, salt: str, documents: frozenset[str]) -> list[NgramIndex]:
        """The remembered replies on any of these documents, newest first, each once."""
        found: dict[int, NgramIndex] = {}
        for doc in sorted(documents):
            key = (salt, doc)
            kept = self._replies.get(key)
            if kept:
                self._replies.move_to_end(key)
                for _, index in reversed(kept):
                    found.setdefault(id(index), index)
        return list(found.values())

    def forget(self, document_ids: set[str]) -> None:
        """A deleted document's replies (those on it among others too) draft nothing again."""
        for key in list(self._replies):
            kept = deque(
                (r for r in self._replies[key] if not (r[0] & document_ids)),
                maxlen=self.per_document,
            )
            if kept:
                self._replies[key] = kept
            else:
                del self._replies[key]

    def clear(self) -> None:
        self._replies.clear()
