"""bench.gpu.random_model: a model of the packaged model's tokenizer and a chosen shape, with
random weights, that llama.cpp loads, quantizes and decodes with."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from bench.gpu import random_model
from bench.gpu.kit import llm_skeleton


@pytest.fixture(scope="module")
def metadata(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("meta") / "meta.gguf"
    llm_skeleton(model_path, out)
    return out


def test_the_skeleton_keeps_every_key_and_no_tensor(metadata: Path, model_path: str) -> None:
    original, skeleton = gguf.GGUFReader(model_path), gguf.GGUFReader(str(metadata))
    assert not skeleton.tensors
    assert metadata.stat().st_size < Path(model_path).stat().st_size / 10
    keys = {k for k in original.fields if not k.startswith("GGUF.")}
    assert keys == {k for k in skeleton.fields if not k.startswith("GGUF.")}
    tokens = "tokenizer.ggml.tokens"
    assert original.fields[tokens].contents() == skeleton.fields[tokens].contents()


def test_a_tiny_model_has_the_shape_and_the_tokenizer(metadata: Path, tmp_path: Path) -> None:
    out = random_model.make(metadata, tmp_path / "tiny.gguf", "tiny", "q4_1")
    reader = gguf.GGUFReader(str(out))
    tiny = random_model.SHAPES["tiny"]
    assert reader.fields["llama.embedding_length"].contents() == tiny.n_embd
    assert reader.fields["llama.block_count"].contents() == tiny.n_layer
    assert reader.fields["general.size_label"].contents() == "tiny"
    names = {t.name for t in reader.tensors}
    assert f"blk.{tiny.n_layer - 1}.ffn_down.weight" in names
    assert not (tmp_path / "tiny.f16.gguf").exists()  # the F16 file is gone after quantizing
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.Q4_1


def test_llama_cpp_decodes_with_the_tiny_model(
    metadata: Path, model_path: str, tmp_path: Path
) -> None:
    import llama_cpp

    from mm.ggml_backends import load_backends

    load_backends()  # the CPU variant's module: llama_cpp.Llama looks beside python's binary
    out = random_model.make(metadata, tmp_path / "tiny.gguf", "tiny", "q4_1")
    text = b"The rivers of Europe"
    packaged = llama_cpp.Llama(model_path, vocab_only=True, verbose=False)
    llm = llama_cpp.Llama(str(out), n_ctx=256, n_threads=1, verbose=False)
    try:
        assert llm.tokenize(text) == packaged.tokenize(text)  # the packaged tokenizer
        reply = llm.create_completion(text.decode(), max_tokens=4, temperature=0)
        assert reply["usage"]["completion_tokens"] >= 1
    finally:
        llm.close()
        packaged.close()


def test_an_unknown_architecture_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.gguf"
    writer = gguf.GGUFWriter(str(path), arch="mamba")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="only llama"):
        random_model.write_f16(path, tmp_path / "out.gguf", random_model.SHAPES["tiny"])
