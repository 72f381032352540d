"""`CollectionPrefixes`: a collection's whole prefix for full-document mode, and whether it fits.

In full mode a question's prompt is the document head (system prompt, "Sources:"), then every
ready chunk of the collection in its stable order (by number, see
app/db/documents/collection_chunks.py), each as its stored token ids, then the question (the
tail). Everything before the tail is the same for every question of every session and API key
of the tenant: the collection's prefix, computed once into the prefix cache
(app/docs/background/collection_prefill.py) and reused from any slot or tier. A document made
ready later goes at the end, so the prefix of the collection as it was stays a prefix of it as
it is, and only the new tail is computed.

The prefix of a collection is read from the database once per version of it (the version moves
whenever its ready chunks change) and kept, a bounded number of tokens in all. A collection
whose rows already say it cannot fit (its documents' token counts, made at ingest) is never
read whole: its size is reported from those counts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from app.db.documents.collection_chunks import CollectionChunks
from app.db.documents.document_records import ChunkRecord, CollectionRecord
from app.docs.questions.answer_sources import ChunkWords, index
from app.docs.questions.doc_prompt import DocPrompter

FillTokens = Callable[[list[ChunkRecord]], None]  # fills in token ids missing for this model
# A collection whose rows count more than this many times the context is not read whole.
READ_LIMIT = 2


@dataclass(slots=True)
class CollectionPrefix:
    """Head + every ready chunk of a collection, as one prompt prefix."""

    tokens: list[int]  # head + chunks (empty when only its size is known: far too long)
    chunks: list[ChunkRecord]  # in prompt order (by number)
    head_len: int
    n_tokens: int  # len(tokens), or its size from the documents' rows when not read
    version: int
    documents: frozenset[str] = frozenset()
    _indexed: list[ChunkWords] | None = field(default=None, repr=False)

    @property
    def indexed(self) -> list[ChunkWords]:
        """Its chunks' words and trigrams (answer_sources.py), computed on first use."""
        if self._indexed is None:
            self._indexed = index(self.chunks)
        return self._indexed

    @property
    def empty(self) -> bool:
        """No ready document: nothing before the question but the head."""
        return self.n_tokens <= self.head_len


@dataclass(slots=True, frozen=True)
class Fit:
    """How a full-mode prompt fits the context one request may use."""

    prefix: int  # the collection's tokens (head + chunks)
    question: int  # the tail's: the question and the template around it
    room: int  # kept free for the answer
    n_ctx: int  # the context one request may use

    @property
    def over(self) -> int:
        """Tokens over the context (<= 0: it fits)."""
        return self.prefix + self.question + self.room - self.n_ctx

    def message(self) -> str:
        return (
            f"the collection's documents are {self.prefix} tokens; with the question "
            f"({self.question}) and room for the answer ({self.room}) that is {self.over} tokens "
            f"over the context of {self.n_ctx} tokens one request may use: ask in retrieval "
            f'mode, or send "fallback": "retrieval" to be answered from the best chunks instead'
        )


class CollectionPrefixes:
    def __init__(
        self,
        reader: CollectionChunks,
        prompts: DocPrompter,
        fill_tokens: FillTokens,
        model_key: str,
        n_ctx: int,
        reserve: int,
        keep_tokens: int = 0,
    ) -> None:
        """`n_ctx`: the context one request may use; `reserve`: what a full-mode prompt keeps
        free for the question and its answer (--doc-full-reserve); `keep_tokens`: most tokens of
        prefixes kept between questions (0: four contexts' worth)."""
        self.reader, self.prompts, self.fill_tokens = reader, prompts, fill_tokens
        self.model_key = model_key
        self.n_ctx, self.reserve = n_ctx, reserve
        self.keep_tokens = keep_tokens or max(4 * n_ctx, 65536)
        self._lock = threading.Lock()
        # (collection id, version, head) -> its prefix, least recently used first
        self._kept: OrderedDict[tuple[str, int, tuple[int, ...]], CollectionPrefix] = OrderedDict()

    def head(self, collection: CollectionRecord) -> list[int]:
        return self.prompts.parts(collection.system_prompt, "")[0]

    def prefix(self, collection: CollectionRecord) -> CollectionPrefix:
        """The collection's prefix now (database reads: call in a worker thread)."""
        head = self.head(collection)
        size = self.reader.size(collection.id)
        if size is None or size.documents == 0:
            return CollectionPrefix(list(head), [], len(head), len(head), 0)
        key = (collection.id, size.version, tuple(head))
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
        if len(head) + size.tokens > READ_LIMIT * self.n_ctx:
            return CollectionPrefix([], [], len(head), len(head) + size.tokens, size.version)
        version, chunks = self.reader.chunks(collection.id, self.model_key)
        self.fill_tokens(chunks)
        tokens = list(head)
        for c in chunks:
            tokens.extend(c.token_ids or ())
        documents = frozenset(c.document_id for c in chunks)
        found = CollectionPrefix(tokens, chunks, len(head), len(tokens), version, documents)
        self._keep((collection.id, version, tuple(head)), found)
        return found

    def fit(self, prefix: CollectionPrefix, question: int = 0, answer: int | None = None) -> Fit:
        """How the prefix fits with a question of `question` tokens and an answer of at most
        `answer` (None: no limit). The reserve is what the question and the answer get
        together, and at least one token is left for the answer; so a collection that fits
        alone (question 0) takes every question shorter than the reserve."""
        room = max(self.reserve - question, 1)
        if answer is not None:
            room = min(room, answer)
        return Fit(prefix.n_tokens, question, room, self.n_ctx)

    def forget(self, collection_id: str) -> None:
        with self._lock:
            for key in [k for k in self._kept if k[0] == collection_id]:
                del self._kept[key]

    def _keep(self, key: tuple[str, int, tuple[int, ...]], prefix: CollectionPrefix) -> None:
        with self._lock:
            for old in [k for k in self._kept if k[0] == key[0]]:
                del self._kept[old]  # an older version of it is never asked for again
            self._kept[key] = prefix
            total = sum(p.n_tokens for p in self._kept.values())
            while total > self.keep_tokens and len(self._kept) > 1:
                _, gone = self._kept.popitem(last=False)
                total -= gone.n_tokens
