"""mm.mtmd_bridge through the real mtmd path: the tiny projector from scripts/make_tiny_mmproj.py
on the default text model (SmolLM2-135M, n_embd 576), no download.

Everything that would end in a GGML_ASSERT must come back as ValueError: if one of these tests
kills the interpreter, that is the failure.
"""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from PIL import Image

from app.engine.llama.batch import Batch
from mm.ggml_backends import load_backends
from mm.mtmd_bridge import ImageChunk, ImageInput, MtmdContext, MtmdError, TextChunk

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_tiny_mmproj.py"
N_SEQ = 2
N_BATCH = 512
IMAGE_TOKENS = 64  # (64 px / 8 px patches)^2, one token per patch for the "mlp" projector


def make_mmproj(out: Path, *args: str) -> Path:
    subprocess.run([sys.executable, str(SCRIPT), str(out), *args], check=True, capture_output=True)
    return out


def random_image(seed: int, size: int = 64) -> ImageInput:
    rgb = np.random.default_rng(seed).integers(0, 256, (size, size, 3), dtype=np.uint8)
    return ImageInput.from_rgb(size, size, rgb.tobytes())


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_mmproj(tmp_path_factory.mktemp("mmproj") / "tiny.gguf")


@pytest.fixture(scope="module")
def llm(model_path: str) -> Iterator[tuple[int, int]]:
    """(llama_model, llama_context): 2 sequences, unified KV, as the engine sets them up."""
    load_backends()  # the CPU variant's module, before llama_backend_init
    llama_cpp.llama_backend_init()
    mparams = llama_cpp.llama_model_default_params()
    mparams.n_gpu_layers = 0
    if "AMX_INT8 = 1" in llama_cpp.llama_print_system_info().decode():
        mparams.use_extra_bufts = False  # llama.cpp's AMX kernels crash on this machine's CPU
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), mparams)
    assert model
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = 1024
    cparams.n_batch = cparams.n_ubatch = N_BATCH
    cparams.n_seq_max = N_SEQ
    cparams.n_threads = cparams.n_threads_batch = 2
    cparams.kv_unified = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    assert ctx
    yield model, ctx
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


@pytest.fixture(scope="module")
def bridge(mmproj: Path, llm: tuple[int, int]) -> Iterator[MtmdContext]:
    with MtmdContext(str(mmproj), llm[0], n_threads=2) as ctx:
        yield ctx


def seq_pos_max(ctx: int, seq_id: int) -> int:
    return llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(ctx), seq_id)


def decode_text(ctx: int, tokens: list[int], n_past: int, seq_id: int) -> int:
    batch = Batch(len(tokens))
    try:
        for i, tok in enumerate(tokens):
            batch.add(tok, n_past + i, seq_id, logits=i == len(tokens) - 1)
        assert llama_cpp.llama_decode(ctx, batch.raw) == 0
    finally:
        batch.close()
    return n_past + len(tokens)


def last_logits(ctx: int, model: int) -> np.ndarray:
    n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,)).copy()


def test_script_is_small_and_deterministic(mmproj: Path, tmp_path: Path) -> None:
    assert mmproj.stat().st_size < 1 << 20
    again = make_mmproj(tmp_path / "again.gguf")
    other = make_mmproj(tmp_path / "other.gguf", "--seed", "1")
    assert again.read_bytes() == mmproj.read_bytes()
    assert other.read_bytes() != mmproj.read_bytes()


def test_projector_of_another_width_is_refused(tmp_path: Path, llm: tuple[int, int]) -> None:
    wrong = make_mmproj(tmp_path / "wide.gguf", "--n-embd", "512")
    with pytest.raises(MtmdError):
        MtmdContext(str(wrong), llm[0], n_threads=2)
    with pytest.raises(MtmdError):
        MtmdContext(str(tmp_path / "missing.gguf"), llm[0], n_threads=2)


def test_tokenize_gives_text_image_text(bridge: MtmdContext) -> None:
    image = random_image(0)
    chunks = bridge.tokenize(f"Look: {bridge.marker} What is it?", [image])
    assert [type(c) for c in chunks] == [TextChunk, ImageChunk, TextChunk]
    img = chunks[1]
    assert isinstance(img, ImageChunk)
    assert (img.id, img.n_tokens, img.n_pos) == (image.id, IMAGE_TOKENS, IMAGE_TOKENS)
    assert img.media().n_pos == IMAGE_TOKENS
    assert not bridge.use_mrope and not bridge.non_causal  # why n_pos == n_tokens here
    assert all(chunks[i].tokens for i in (0, 2))


def test_ids_and_embeddings_follow_the_pixels(bridge: MtmdContext) -> None:
    a, b = random_image(1), random_image(2)
    assert a.id != b.id
    # The same pixels through a lossless file format: same id.
    png = io.BytesIO()
    Image.frombytes("RGB", (64, 64), a.rgb).save(png, format="PNG")
    decoded = Image.open(io.BytesIO(png.getvalue())).convert("RGB")
    assert ImageInput.from_rgb(64, 64, decoded.tobytes()).id == a.id

    chunks = bridge.tokenize(f"{bridge.marker}{bridge.marker}", [a, b])
    images = [c for c in chunks if isinstance(c, ImageChunk)]
    assert [c.id for c in images] == [a.id, b.id]
    ea, eb = (bridge.encode(c) for c in images)
    assert ea.shape == eb.shape == (IMAGE_TOKENS, 576)
    assert ea.dtype == np.float32 and np.isfinite(ea).all()
    assert not np.allclose(ea, eb)
    assert np.array_equal(bridge.encode(images[0]), ea)  # a copy, not the reused buffer


def test_eval_image_fills_the_sequence(bridge: MtmdContext, llm: tuple[int, int]) -> None:
    model, ctx = llm
    seq = 1
    chunks = bridge.tokenize(f"A picture: {bridge.marker} Describe it.", [random_image(3)])
    before, image, after = chunks
    assert isinstance(before, TextChunk) and isinstance(image, ImageChunk)
    assert isinstance(after, TextChunk)

    def run(embeddings: np.ndarray | None) -> np.ndarray:
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq, -1, -1)
        n_past = decode_text(ctx, before.tokens, 0, seq)
        new_n_past = bridge.eval_image(ctx, image, n_past, seq, N_BATCH, embeddings)
        assert new_n_past == n_past + image.n_pos
        assert seq_pos_max(ctx, seq) == new_n_past - 1
        decode_text(ctx, after.tokens, new_n_past, seq)
        return last_logits(ctx, model)

    try:
        through_encoder = run(None)
        from_cache = run(bridge.encode(image))
    finally:
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), seq, -1, -1)
    # Cached embeddings put the same KV in place as the encoder path.
    assert np.allclose(through_encoder, from_cache, atol=1e-3)


def test_bad_eval_arguments_raise_instead_of_aborting(
    bridge: MtmdContext, llm: tuple[int, int]
) -> None:
    _, ctx = llm
    (image,) = bridge.tokenize(bridge.marker, [random_image(4)])
    assert isinstance(image, ImageChunk)
    for seq_id in (N_SEQ, -1):
        with pytest.raises(ValueError, match="seq_id"):
            bridge.eval_image(ctx, image, 0, seq_id, N_BATCH)
    for n_batch in (N_BATCH + 1, 0):
        with pytest.raises(ValueError, match="n_batch"):
            bridge.eval_image(ctx, image, 0, 0, n_batch)
    with pytest.raises(ValueError, match="n_past"):
        bridge.eval_image(ctx, image, -1, 0, N_BATCH)
    with pytest.raises(ValueError, match="embeddings"):
        bridge.eval_image(ctx, image, 0, 0, N_BATCH, np.zeros((IMAGE_TOKENS, 575), np.float32))
    # Positions that do not continue the sequence are refused by llama_decode itself: an error,
    # and nothing is written.
    mem = llama_cpp.llama_get_memory(ctx)
    try:
        n_past = decode_text(ctx, [1, 2], 0, 0)
        for wrong in (n_past + 5, 0):
            with pytest.raises(MtmdError):
                bridge.eval_image(ctx, image, wrong, 0, N_BATCH)
            assert seq_pos_max(ctx, 0) == n_past - 1
    finally:
        llama_cpp.llama_memory_seq_rm(mem, 0, -1, -1)
    bridge.release(image)
    with pytest.raises(ValueError, match="released"):
        bridge.encode(image)


def test_tokenize_checks_markers_and_pixels(bridge: MtmdContext) -> None:
    with pytest.raises(ValueError, match="markers"):
        bridge.tokenize("no marker here", [random_image(5)])
    with pytest.raises(ValueError, match="bytes"):
        ImageInput(64, 64, b"\x00" * 10, "ab")
    (text,) = bridge.tokenize("plain text", [])
    assert isinstance(text, TextChunk) and text.tokens
