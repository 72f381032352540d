"""`Model`: the only owner of llama.cpp handles (model, context, vocab, memory).

Everything above this file sees Python ints, bytes and strings. One llama context serves every slot:
`n_seq_max` = number of slots and a unified KV cache, so a slot can use the whole context and (in
later layers) sequences can share cells.

Compute (`decode`) belongs to one thread, the engine's: llama.cpp's OpenMP keeps a thread team per
calling thread, and one graph run from a second thread slows every later decode (figures:
docs/kv-reuse.md, Measurements).

llama-server's flags become llama.cpp's load parameters in app/engine/llama/llama_params.py.
"""

from __future__ import annotations

import ctypes
import logging

import llama_cpp
import numpy as np

from app.cache.state_pool import StateBlob, StatePool
from app.engine.engine_config import EngineConfig
from app.engine.llama.batch import Batch
from app.engine.llama.llama_params import context_params, gpu_layers, model_params
from mm.compute_thread import ComputeThread
from mm.ggml_backends import BackendError, load_backends
from mm.ggml_log import log_callback

log = logging.getLogger(__name__)


# Keep the C callback alive for the life of the process: llama.cpp holds the raw pointer.


def _install_log_callback(verbose: bool) -> None:
    # Warnings and errors always; the rest only when verbose.
    callback = log_callback(log, "llama.cpp", lambda level: verbose or level >= logging.WARNING)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


class ModelError(RuntimeError):
    pass


class Model:
    def __init__(self, config: EngineConfig) -> None:
        # The first decode claims the model for its thread; a decode from any other raises.
        self.compute = ComputeThread("Model")
        _install_log_callback(config.verbose)
        # Before llama_backend_init, which looks for backend modules beside python's binary.
        try:
            self.backends = load_backends(config.cpu_variant)
        except BackendError as e:
            raise ModelError(str(e)) from None
        log.info("compute: %s", self.backends.summary())
        llama_cpp.llama_backend_init()
        if "CPU :" not in llama_cpp.llama_print_system_info().decode("utf-8", "replace"):
            where = self.backends.library_dir
            raise ModelError(f"libllama sees no CPU backend (loaded from {where})")
        self.path = config.model_path
        self.n_gpu_layers = gpu_layers(config.n_gpu_layers)
        self._mparams = model_params(config, self.n_gpu_layers)
        # The vocabulary and metadata come from a vocab-only handle kept for the life of this
        # object: any thread may tokenize while the weights are unloaded (sleep) or reloading.
        self._meta = _load(config.model_path, vocab_only=True)
        self._vocab = llama_cpp.llama_model_get_vocab(self._meta)
        self._model: llama_cpp.llama_model_p | None = None
        self._ctx: llama_cpp.llama_context_p | None = None
        self._mem = None
        self._config = config
        self._cparams: llama_cpp.llama_context_params | None = None
        self.load()
        weights = self._model
        # One sequence more than the slots: the scratch sequence where a chunk's KV is computed
        # or restored before it is moved into a slot (app/engine/blend/chunk_blend.py). Not with a
        # window-only SWA cache, which cannot keep a moved chunk and whose size grows by a
        # window per sequence.
        self.n_swa = llama_cpp.llama_model_n_swa(weights)
        window_only = self.n_swa > 0 and not config.swa_full
        self.scratch_seq: int | None = None if window_only else config.n_parallel
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        self.n_batch = llama_cpp.llama_n_batch(self._ctx)
        self.n_seq_max = config.n_parallel  # the slots
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._pieces: dict[int, bytes] = {}  # token (~token: special) -> its piece
        self._eog: dict[int, bool] = {}
        # What the weights' hyperparameters say, read once: the vocab-only handle has none.
        self.n_ctx_train = llama_cpp.llama_model_n_ctx_train(weights)
        self.rope_type = llama_cpp.llama_model_rope_type(weights)
        self.rope_freq_scale = llama_cpp.llama_model_rope_freq_scale_train(weights)
        self._recurrent = bool(
            llama_cpp.llama_model_is_recurrent(weights) or llama_cpp.llama_model_is_hybrid(weights)
        )
        self.bos = llama_cpp.llama_vocab_bos(self._vocab)
        self.eos = llama_cpp.llama_vocab_eos(self._vocab)
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))
        self.swa_full = config.swa_full

    # --- weights and context: loaded at start, unloaded while asleep -----------------------------

    @property
    def loaded(self) -> bool:
        return self._ctx is not None

    def load(self) -> None:
        """Load the weights and create the context, with the parameters of the first load (the
        same cells, slots and threads: saved KV states fit again). No-op when loaded."""
        if self._ctx is not None:
            return
        config = self._config
        self._model = _load(config.model_path, self._mparams)
        if self._cparams is None:
            window_only = llama_cpp.llama_model_n_swa(self._model) > 0 and not config.swa_full
            try:
                self._cparams = context_params(
                    config, config.n_parallel + (0 if window_only else 1)
                )
            except KeyError as e:
                self._free_weights()
                raise ModelError(f"unknown KV cache type or flash-attention mode {e}") from None
        self._ctx = llama_cpp.llama_init_from_model(self._model, self._cparams)
        if not self._ctx:
            self._free_weights()
            quantized_v = config.cache_type_v not in ("f32", "f16", "bf16")
            hint = " (a quantized V cache needs flash attention: -fa on)" if quantized_v else ""
            raise ModelError(f"failed to create llama context{hint}")
        self._mem = llama_cpp.llama_get_memory(self._ctx)

    def unload(self) -> None:
        """Free the context (every sequence's KV) and the weights; the vocabulary stays. The
        owner thread, with no decode running."""
        self._free_weights()

    def _free_weights(self) -> None:
        if self._ctx:
            llama_cpp.llama_free(self._ctx)
        if self._model:
            llama_cpp.llama_model_free(self._model)
        self._ctx = self._model = self._mem = None

    # --- vocabulary -----------------------------------------------------------------------------

    def tokenize(
        self, text: str, add_special: bool = True, parse_special: bool = True
    ) -> list[int]:
        data = text.encode("utf-8")
        n_max = len(data) + 16
        buf = (llama_cpp.llama_token * n_max)()
        n = llama_cpp.llama_tokenize(
            self._vocab, data, len(data), buf, n_max, add_special, parse_special
        )
        if n < 0:  # buffer too small: -n is the size needed
            n_max = -n
            buf = (llama_cpp.llama_token * n_max)()
            n = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buf, n_max, add_special, parse_special
            )
        if n < 0:
            raise ModelError("tokenization failed")
        return list(buf[:n])

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        # The vocabulary never changes: a token's piece is computed once. The ctypes call it
        # saves releases the GIL, and on the engine thread every release mid-step lets the HTTP
        # thread in first (docs/kv-reuse.md, Measurements). A dict's get and set are
        # atomic, so any thread may call this.
        key = token if not special else ~token
        piece = self._pieces.get(key)
        if piece is None:
            piece = self._pieces[key] = self._piece(token, special)
        return piece

    def _piece(self, token: int, special: bool) -> bytes:
        # A buffer per call: tokenizing and detokenizing are safe from any thread this way.
        buf = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, -n, 0, special)
        return buf.raw[:n]

    def detokenize(self, tokens: list[int], special: bool = False) -> str:
        return b"".join(self.token_to_piece(t, special) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        # Cached like pieces: each ctypes call lets the HTTP thread take the GIL mid-step.
        eog = self._eog.get(token)
        if eog is None:
            eog = self._eog[token] = bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))
        return eog

    def token_text(self, token: int) -> str:
        return self.token_to_piece(token, special=True).decode("utf-8", "replace")

    def chat_template(self) -> str | None:
        raw = llama_cpp.llama_model_chat_template(self._meta, None)
        return raw.decode("utf-8") if raw else None

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = llama_cpp.llama_model_meta_val_str(self._meta, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    # --- evaluation -----------------------------------------------------------------------------

    def new_batch(self) -> Batch:
        return Batch(self.n_batch)

    def logits(self, row: int) -> np.ndarray:
        """Batch row `row`'s logits of the last decode: a view, valid until the next decode."""
        ptr = llama_cpp.llama_get_logits_ith(self.ctx, row)
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def decode(self, batch: Batch) -> int:
        """llama_decode; 0 = ok, 1 = no KV room for the batch, other = error. Releases the GIL.
        Owner thread only (raises WrongThreadError otherwise)."""
        self.compute.check("decode")
        return llama_cpp.llama_decode(self._context(), batch.raw)

    @property
    def ctx(self) -> llama_cpp.llama_context_p:
        """For samplers (they read logits from the context) and the projector's image eval."""
        return self._context()

    def _context(self) -> llama_cpp.llama_context_p:
        # A NULL context or memory would crash inside llama.cpp: a bug above must raise instead.
        if self._ctx is None:
            raise ModelError("the model is unloaded (asleep)")
        return self._ctx

    def _memory(self):  # noqa: ANN202 (llama_memory_t)
        if self._mem is None:
            raise ModelError("the model is unloaded (asleep)")
        return self._mem

    @property
    def handle(self) -> llama_cpp.llama_model_p:
        """The loaded model, for the projector only (mtmd opens its context on it)."""
        return self._model

    @property
    def vocab(self) -> llama_cpp.llama_vocab_p:
        return self._vocab

    # --- KV memory ------------------------------------------------------------------------------

    def seq_rm(self, seq_id: int, p0: int, p1: int = -1) -> bool:
        """Drop positions [p0, p1) of a sequence; False if the memory cannot cut partially."""
        return bool(llama_cpp.llama_memory_seq_rm(self._memory(), seq_id, p0, p1))

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        """Make `dst` share src's cells for positions [p0, p1): no copy in a unified KV cache; a
        later write to either sequence goes to new cells."""
        llama_cpp.llama_memory_seq_cp(self._memory(), src, dst, p0, p1)

    def state_size(self, seq_id: int) -> int:
        return llama_cpp.llama_state_seq_get_size_ext(self._context(), seq_id, 0)

    def state_save(self, seq_id: int) -> bytes:
        """The sequence's KV state (cells, positions, values) as bytes (a fresh copy: for rare
        saves such as /slots files; the cache tiers use `state_save_into`)."""
        buf = bytearray(self.state_size(seq_id))
        return bytes(memoryview(buf)[: self.state_save_into(seq_id, buf)])

    def state_save_into(self, seq_id: int, buf: bytearray) -> int:
        """Write the sequence's KV state into `buf` (no copy, no zero-fill); returns the bytes
        written, 0 if it does not fit (ask `state_size` first)."""
        view = (ctypes.c_uint8 * len(buf)).from_buffer(buf)
        return llama_cpp.llama_state_seq_get_data_ext(self._context(), view, len(buf), seq_id, 0)

    def state_blob(self, seq_id: int, pool: StatePool, size: int | None = None) -> StateBlob:
        """The sequence's KV state written into a pooled buffer (`size`: its `state_size`, when
        the caller asked already); the caller owns the blob's reference."""
        blob = pool.take(self.state_size(seq_id) if size is None else size)
        blob.n_bytes = self.state_save_into(seq_id, blob.buf)
        return blob

    def state_restore(self, seq_id: int, data: bytes | bytearray | memoryview) -> bool:
        """Load a saved state into an empty sequence, straight from `data` (no copy); False if
        it does not fit (KV full)."""
        n = len(data)
        if isinstance(data, bytes):  # immutable: point at its buffer
            src = ctypes.cast(ctypes.c_char_p(data), ctypes.POINTER(ctypes.c_uint8))
        else:
            src = (ctypes.c_uint8 * n).from_buffer(data)
        return llama_cpp.llama_state_seq_set_data_ext(self._context(), src, n, seq_id, 0) > 0

    @property
    def can_shift(self) -> bool:
        """Whether KV positions can be moved (needed by --cache-reuse)."""
        return bool(llama_cpp.llama_memory_can_shift(self._memory())) and self.n_swa <= 0

    @property
    def can_roll_back(self) -> bool:
        """Whether the newest positions of a sequence can be dropped and generation go on
        from there (speculative decoding): not a recurrent state, and a sliding-window model
        only with a full-size SWA cache (a window-only one may have dropped cells the earlier
        position still needs)."""
        return not self._recurrent and (self.n_swa <= 0 or self.swa_full)

    def blend_unsupported(self) -> str | None:
        """Why chunk KV cannot be moved to another position in this memory (None: it can)."""
        if self.n_swa > 0 and not self.swa_full:
            return "the sliding-window cache (--no-swa-full) does not keep a placed chunk's KV"
        if not llama_cpp.llama_memory_can_shift(self._memory()) or self.scratch_seq is None:
            return "the model's KV memory cannot shift positions"
        return None

    def seq_shift(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        """Move positions [p0, p1) by delta (RoPE is re-applied to the keys)."""
        llama_cpp.llama_memory_seq_add(self._memory(), seq_id, p0, p1, delta)

    def seq_clear(self, seq_id: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory(), seq_id, -1, -1)  # whole sequence: never fails

    def can_keep(self, seq_id: int, pos: int) -> bool:
        """Whether a sequence cut back to positions [0, pos) can go on from `pos`.

        A sliding-window model without a full-size SWA cache has dropped the window cells of old
        positions; continuing at `pos` needs the window before it (llama-server's check).
        """
        if self.n_swa <= 0 or self.swa_full or pos == 0:
            return True
        pos_min = llama_cpp.llama_memory_seq_pos_min(self._memory(), seq_id)
        return pos_min < 0 or pos_min <= max(0, pos - self.n_swa)

    def seq_pos_max(self, seq_id: int) -> int:
        return llama_cpp.llama_memory_seq_pos_max(self._memory(), seq_id)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._memory(), True)

    @property
    def closed(self) -> bool:
        return not self._meta

    def close(self) -> None:
        self._free_weights()
        if self._meta:
            llama_cpp.llama_model_free(self._meta)
            self._meta = None


def _load(path: str, params: llama_cpp.llama_model_params | None = None, vocab_only: bool = False):  # noqa: ANN202
    """llama_model_load_from_file, or ModelError."""
    if params is None:
        params = llama_cpp.llama_model_default_params()
    params.vocab_only = vocab_only
    handle = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if not handle:
        raise ModelError(f"failed to load model {path}")
    return handle
