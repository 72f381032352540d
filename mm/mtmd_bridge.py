"""`MtmdContext`: the only owner of llama.cpp mtmd handles (projector, bitmaps, input chunks).

Everything above this file sees plain data: text chunks are token lists, image chunks are
(id, n_tokens, n_pos) plus an opaque handle that only this class dereferences.

Several mtmd/llama.cpp failures are GGML_ASSERTs that abort the whole process (checked on the
llama.cpp vendored by llama-cpp-python 0.3.36): a seq_id outside [0, n_seq_max), a helper
n_batch above the context's n_batch, or embeddings whose width is not the model's input width
all end in `GGML_ASSERT(idx >= 0)` inside the helper's batch builder. Every such precondition is
checked here first and raised as ValueError. Positions that do not continue the sequence's KV
are not a crash: llama_decode rejects the batch and we raise MtmdError.

Not thread-safe: one mtmd context has one output buffer; call it from the engine thread only.
Encoding and image evaluation run graphs: they belong to the thread that created the context
(its warm-up encode runs there), checked by `ComputeThread` (mm/compute_thread.py).
"""

from __future__ import annotations

import ctypes
import logging
import weakref
from dataclasses import dataclass, field

import llama_cpp
import numpy as np
from llama_cpp import mtmd_cpp as mtmd

from mm.compute_thread import ComputeThread
from mm.ggml_log import log_callback
from mm.image import pixel_id
from mm.token_sequence import MediaChunk

log = logging.getLogger(__name__)


def _install_log_callback() -> None:
    # mtmd/clip print every tensor and each encode to stderr by default: keep warnings and
    # errors (the INFO lines are dozens per load and per image).
    callback = log_callback(log, "mtmd", lambda level: level >= logging.WARNING)
    mtmd.mtmd_helper_log_set(callback, ctypes.c_void_p(0))  # also sets mtmd's own logger


class MtmdError(RuntimeError):
    """mtmd refused (bad file, failed encode or decode); the process and its KV are intact."""


@dataclass(frozen=True, slots=True)
class ImageInput:
    """Decoded pixels: `rgb` is width*height*3 bytes, row-major RGB888. `id` names the picture
    by its pixels (hex hash), so the same image in another lossless encoding is the same chunk."""

    width: int
    height: int
    rgb: bytes
    id: str

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ValueError(f"image size must be positive, got {self.width}x{self.height}")
        if len(self.rgb) != self.width * self.height * 3:
            # mtmd_bitmap_init copies width*height*3 bytes blindly: a short buffer is a read
            # past its end, not an error.
            raise ValueError(f"rgb has {len(self.rgb)} bytes, not {self.width}x{self.height}x3")
        if not self.id or "\x00" in self.id:
            raise ValueError("image id must be a non-empty string without NUL")

    @classmethod
    def from_rgb(cls, width: int, height: int, rgb: bytes) -> ImageInput:
        # One identity for the whole server: mm.image's pixel hash (size included).
        return cls(width, height, rgb, pixel_id(width, height, rgb))


@dataclass(slots=True, eq=False, weakref_slot=True)  # identity-hashed, for WeakSet/finalize
class _Handle:
    """An owned mtmd_input_chunk copy; freed exactly once by `free` (release, close or GC)."""

    ptr: int
    free: weakref.finalize = field(init=False, repr=False)


@dataclass(slots=True)
class TextChunk:
    tokens: list[int]


@dataclass(slots=True, eq=False)
class ImageChunk:
    id: str
    n_tokens: int  # embeddings it feeds (placeholder slots in the token sequence)
    n_pos: int  # KV positions it advances; differs from n_tokens only for M-RoPE models
    handle: _Handle = field(repr=False)

    def media(self) -> MediaChunk:
        return MediaChunk(self.id, self.n_tokens, self.n_pos)


Chunk = TextChunk | ImageChunk


class MtmdContext:
    def __init__(
        self, mmproj_path: str, model: llama_cpp.llama_model_p, n_threads: int, warmup: bool = True
    ) -> None:
        _install_log_callback()
        self.compute = ComputeThread("MtmdContext")
        self.compute.claim()  # the warm-up encode below runs on this thread
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = False  # CPU-only build; also keeps the projector off any GPU backend
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = warmup  # one encode at load: the first real image is not slower
        # Returns NULL (no crash) on a missing file, an unknown projector or a width mismatch;
        # a wrongly typed metadata value in the file still aborts inside gguf_get_val_*.
        self._ctx = mtmd.mtmd_init_from_file(mmproj_path.encode(), model, params)
        if not self._ctx:
            raise MtmdError(f"failed to load multimodal projector {mmproj_path}")
        self.n_embd = llama_cpp.llama_model_n_embd_inp(model)
        # Both are fixed per projector + text model (for image chunks): asking once is enough.
        self.use_mrope = bool(mtmd.mtmd_decode_use_mrope(self._ctx))
        self.non_causal = bool(mtmd.mtmd_decode_use_non_causal(self._ctx, None))
        self._handles: weakref.WeakSet[_Handle] = weakref.WeakSet()

    @property
    def marker(self) -> str:
        return mtmd.mtmd_get_marker(self._ctx).decode("utf-8")

    # --- tokenizing -----------------------------------------------------------------------------

    def tokenize(
        self,
        text: str,
        images: list[ImageInput],
        add_special: bool = True,
        parse_special: bool = True,
    ) -> list[Chunk]:
        """Split `text` at each marker into text chunks and one image chunk per marker, in order."""
        self._check_open()
        if text.count(self.marker) != len(images):
            raise ValueError(f"{text.count(self.marker)} markers in text, {len(images)} images")
        data = text.encode("utf-8")
        inp = mtmd.mtmd_input_text()
        inp.text, inp.text_len = data, len(data)
        inp.add_special, inp.parse_special = add_special, parse_special
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(images)))()
        chunks = None
        try:
            for i, image in enumerate(images):
                pixels = (ctypes.c_uint8 * len(image.rgb)).from_buffer_copy(image.rgb)
                bitmaps[i] = mtmd.mtmd_bitmap_init(image.width, image.height, pixels)
                if not bitmaps[i]:
                    raise MtmdError("mtmd_bitmap_init failed")
                # The chunk id is the bitmap id: our pixel hash, never mtmd's file-bytes hash.
                mtmd.mtmd_bitmap_set_id(bitmaps[i], image.id.encode("utf-8"))
            chunks = mtmd.mtmd_input_chunks_init()
            ret = mtmd.mtmd_tokenize(self._ctx, chunks, ctypes.byref(inp), bitmaps, len(images))
            if ret != 0:
                raise MtmdError(f"mtmd_tokenize failed ({ret})")
            n_chunks = mtmd.mtmd_input_chunks_size(chunks)
            return [self._to_chunk(mtmd.mtmd_input_chunks_get(chunks, i)) for i in range(n_chunks)]
        finally:
            # tokenize copies the pixels into its chunks; the bitmaps and the chunk list are ours.
            for ptr in bitmaps:
                if ptr:
                    mtmd.mtmd_bitmap_free(ptr)
            if chunks:
                mtmd.mtmd_input_chunks_free(chunks)

    def _to_chunk(self, ptr: int) -> Chunk:
        kind = mtmd.mtmd_input_chunk_get_type(ptr)
        if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            n = ctypes.c_size_t(0)
            toks = mtmd.mtmd_input_chunk_get_tokens_text(ptr, ctypes.byref(n))
            return TextChunk(list(toks[: n.value]) if n.value else [])
        if kind != mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
            raise MtmdError(f"unsupported mtmd chunk type {kind}")
        # The chunk list is freed when tokenize returns: keep an owned copy for later evaluation.
        owned = mtmd.mtmd_input_chunk_copy(ptr)
        if not owned:
            raise MtmdError("mtmd_input_chunk_copy failed")
        handle = _Handle(owned)
        handle.free = weakref.finalize(handle, mtmd.mtmd_input_chunk_free, owned)
        self._handles.add(handle)
        return ImageChunk(
            id=mtmd.mtmd_input_chunk_get_id(ptr).decode("utf-8"),
            n_tokens=mtmd.mtmd_input_chunk_get_n_tokens(ptr),
            n_pos=mtmd.mtmd_input_chunk_get_n_pos(ptr),
            handle=handle,
        )

    def release(self, chunk: ImageChunk) -> None:
        """Free the chunk's pixels now (also done when the chunk is garbage collected)."""
        chunk.handle.free()

    # --- encoding and evaluation ----------------------------------------------------------------

    def encode(self, chunk: ImageChunk) -> np.ndarray:
        """Run the vision encoder + projector: a new float32 array (n_tokens, n_embd)."""
        ptr = self._live(chunk)
        self.compute.check("encode")
        if mtmd.mtmd_encode_chunk(self._ctx, ptr) != 0:
            raise MtmdError(f"encoding image {chunk.id} failed")
        out = mtmd.mtmd_get_output_embd(self._ctx)
        # Copy: the buffer belongs to the mtmd context and is overwritten by the next encode.
        return np.ctypeslib.as_array(out, shape=(chunk.n_tokens, self.n_embd)).copy()

    def eval_image(
        self,
        lctx: llama_cpp.llama_context_p,
        chunk: ImageChunk,
        n_past: int,
        seq_id: int,
        n_batch: int,
        embeddings: np.ndarray | None = None,
    ) -> int:
        """Put the image into `seq_id`'s KV at positions from `n_past`; returns the new n_past
        (n_past + n_pos). With `embeddings` (from `encode`) the encoder is skipped. No logits
        are requested: the text after the image asks for them."""
        ptr = self._live(chunk)
        self.compute.check("eval_image")
        self._check_eval_args(lctx, chunk.n_tokens, n_past, seq_id, n_batch)
        new_n_past = llama_cpp.llama_pos(0)
        out = ctypes.byref(new_n_past)
        if embeddings is None:
            ret = mtmd.mtmd_helper_eval_chunk_single(
                self._ctx, lctx, ptr, n_past, seq_id, n_batch, False, out
            )
        else:
            if embeddings.dtype != np.float32 or embeddings.shape != (chunk.n_tokens, self.n_embd):
                raise ValueError(
                    f"embeddings must be float32 {(chunk.n_tokens, self.n_embd)}, got "
                    f"{embeddings.dtype} {embeddings.shape}"
                )
            embd = np.ascontiguousarray(embeddings)  # kept alive until the call returns
            embd_p = embd.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            no_cb = mtmd.mtmd_helper_post_decode_callback()  # NULL: no per-batch callback
            ret = mtmd.mtmd_helper_decode_image_chunk(
                self._ctx, lctx, ptr, embd_p, n_past, seq_id, n_batch, out, no_cb, None
            )
        if ret != 0:
            # e.g. positions that do not continue the sequence, or no free KV cells
            raise MtmdError(f"evaluating image {chunk.id} at {n_past} in seq {seq_id} failed")
        return new_n_past.value

    def _check_eval_args(
        self, lctx: int, n_tokens: int, n_past: int, seq: int, n_batch: int
    ) -> None:
        if not lctx:
            raise ValueError("no llama context")
        if llama_cpp.llama_model_n_embd_inp(llama_cpp.llama_get_model(lctx)) != self.n_embd:
            raise ValueError("llama context belongs to a model of another embedding width")
        n_seq_max = llama_cpp.llama_n_seq_max(lctx)
        if not 0 <= seq < n_seq_max:
            raise ValueError(f"seq_id {seq} outside [0, {n_seq_max})")
        ctx_batch = llama_cpp.llama_n_batch(lctx)
        if not 0 < n_batch <= ctx_batch:
            raise ValueError(f"n_batch {n_batch} outside [1, {ctx_batch}] (context n_batch)")
        if n_past < 0:
            raise ValueError(f"n_past must be >= 0, got {n_past}")
        if self.non_causal and n_tokens > min(n_batch, llama_cpp.llama_n_ubatch(lctx)):
            # Non-causal attention spans one ubatch only: a split image would attend to half
            # of itself (mtmd-helper's own TODO). Never the case for the llava "mlp" projector.
            raise ValueError(f"image of {n_tokens} tokens needs n_batch/n_ubatch >= it")

    # --- lifetime -------------------------------------------------------------------------------

    def _live(self, chunk: ImageChunk) -> int:
        self._check_open()
        if not isinstance(chunk, ImageChunk) or chunk.handle not in self._handles:
            raise ValueError("not an image chunk of this MtmdContext")
        if not chunk.handle.free.alive:
            raise ValueError(f"image chunk {chunk.id} was released")
        return chunk.handle.ptr

    def _check_open(self) -> None:
        if not self._ctx:
            raise MtmdError("MtmdContext is closed")

    def close(self) -> None:
        for handle in list(self._handles):
            handle.free()
        if self._ctx:
            mtmd.mtmd_free(self._ctx)
            self._ctx = None

    def __enter__(self) -> MtmdContext:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
