"""`Vision`: image input for a loaded model through llama.cpp's mtmd (multimodal projector).

Tokenizing a prompt with images gives text tokens and image chunks; the engine evaluates an
image chunk into a slot's sequence at its position, taking the encoder's output from the
`EncoderCache` when that image was encoded recently (an image whose KV is gone then skips the
vision encoder). Built with the engine, opened on the engine thread (the projector's warm-up
encode runs there) and `eval` only there; `tokenize` only reads the vocabulary and the pixels,
so the HTTP side may call it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.cache.encoder_cache import EncoderCache, EncoderCacheStats
from mm.mmproj_check import check_mmproj
from mm.mtmd_bridge import Chunk, ImageChunk, ImageInput, MtmdContext, TextChunk
from mm.token_sequence import TokenSequence

if TYPE_CHECKING:
    from app.engine.core.slot import Slot
    from app.engine.llama.model import Model
    from app.engine.task import Task

log = logging.getLogger(__name__)

NOT_OPEN = "the projector is not open yet (Engine.start opens it)"


class Vision:
    def __init__(self, model: Model, mmproj_path: str, n_threads: int, cache_bytes: int) -> None:
        self._model = model
        self._path, self._n_threads = mmproj_path, n_threads
        self._opened: MtmdContext | None = None  # by `open`, on the engine thread
        self._marker: str | None = None  # the context's, read once
        self.cache = EncoderCache(cache_bytes)
        self.encoded = 0  # encoder runs (the rest of the images came from the cache)

    def open(self) -> None:
        """Load the projector; its warm-up encode runs here, so call it on the engine thread
        (the engine's `start` does, before any request)."""
        check_mmproj(self._path)  # a badly typed file would abort inside llama.cpp
        self._opened = MtmdContext(self._path, self._model.handle, self._n_threads)
        self._marker = self._opened.marker

    @property
    def _mtmd(self) -> MtmdContext:
        if self._opened is None:
            raise RuntimeError(NOT_OPEN)
        return self._opened

    @property
    def marker(self) -> str:
        """The text that stands for an image in a prompt."""
        if self._marker is None:
            raise RuntimeError(NOT_OPEN)
        return self._marker

    def tokenize(
        self, text: str, images: list[ImageInput], add_special: bool
    ) -> tuple[TokenSequence, dict[str, ImageChunk]]:
        """The prompt as a token sequence (images as media chunks) and each image's chunk.

        A chunk's pixels are freed when the last reference to it goes (the request's), so the
        engine thread never evaluates a freed chunk."""
        chunks: list[Chunk] = self._mtmd.tokenize(text, images, add_special=add_special)
        seq = TokenSequence()
        by_id: dict[str, ImageChunk] = {}
        for chunk in chunks:
            if isinstance(chunk, TextChunk):
                seq.extend(chunk.tokens)
            else:
                seq.add_media(chunk.media())
                by_id.setdefault(chunk.id, chunk)
        return seq, by_id

    def eval(self, chunk: ImageChunk, n_past: int, seq_id: int, salt: str) -> int:
        """Evaluate the image into seq_id's KV from position n_past; returns the new n_past."""
        self._model.compute.check("eval_image")  # it runs llama_decode on the model's context
        key = (salt, chunk.id)  # salted: a cached encode must not tell one tenant another's
        embeddings = self.cache.get(key)
        if embeddings is None:
            embeddings = self._mtmd.encode(chunk)
            self.encoded += 1
            self.cache.put(key, embeddings)
        return self._mtmd.eval_image(
            self._model.ctx,
            chunk,
            n_past,
            seq_id,
            self._model.n_batch,
            embeddings=embeddings,
        )

    def prefill_next(self, task: Task, slot: Slot) -> None:
        """If an image is next in the task's prompt, put it into the slot's KV (raises on
        failure: no room, or the projector failed)."""
        chunk = task.request.prompt.chunk_at(task.n_done)
        if chunk is None:
            return
        n_pos = self.eval(
            task.request.images[chunk.id], slot.cache.n_pos, slot.id, task.request.cache_salt
        )
        if n_pos != slot.cache.n_pos + chunk.n_pos:
            raise RuntimeError(f"the image advanced the KV to {n_pos}, not by {chunk.n_pos}")
        slot.cache.add_media(chunk)
        task.n_done += chunk.n_tokens

    def stats(self) -> EncoderCacheStats:
        """The encoder cache's counters and the encoder runs (engine thread: they change there)."""
        stats = self.cache.stats()
        stats.encoded = self.encoded
        return stats

    def close(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened = None  # asleep: tokenizing an image waits for the wake (Engine.ready)
