"""The model's identity is part of every cache key: two models that share a disk tier (the
router's children, replicas of different models) never read each other's KV, and the same file
under another name does. The identity is the model file's content and the projector's: the same
model with another projector computes other KV for the same image. The twin model
(bench/lib/twin_model.py) has the packaged model's tokenizer, so the same prompt gives the same
tokens on both: only the identity keeps them apart. Each server is stopped before the next
starts, so its slots' KV is in the disk tier."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.cache.state_file import model_identity
from bench.lib.server_process import ROOT, ServerProcess
from bench.lib.twin_model import twin_model

PROMPT = "A list of the rivers of Europe, longest first: " + ", ".join(
    f"river {i} of {i * 13 % 97} km" for i in range(60)
)


# A 1x1 PNG: one image chunk of the tiny projector.
PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4"
    "z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)


def cached_after_restart(model: Path, cache_dir: Path, *args: str) -> int:
    """The cached tokens of PROMPT on a fresh server of `model` on the disk tier `cache_dir`,
    which then keeps PROMPT's KV (saved at its stop)."""
    argv = ("-m", str(model), "-np", "1", "-c", "2048", "--cache-dir", str(cache_dir), *args)
    with ServerProcess(*argv) as server:
        body = {"prompt": PROMPT, "n_predict": 1, "temperature": 0}
        r = httpx.post(server.base_url + "/completion", json=body, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["timings"]["cache_n"]


def image_cached_after_restart(model: str, mmproj: Path, cache_dir: Path) -> int:
    """The cached tokens of an image question, as `cached_after_restart`."""
    argv = ("-m", model, "-np", "1", "-c", "2048", "--cache-dir", str(cache_dir))
    with ServerProcess(*argv, "--mmproj", str(mmproj)) as server:
        content = [
            {"type": "image_url", "image_url": {"url": PIXEL}},
            {"type": "text", "text": PROMPT},
        ]
        body = {"messages": [{"role": "user", "content": content}], "max_tokens": 1}
        r = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)
        assert r.status_code == 200, r.text
        return r.json()["usage"]["prompt_tokens_details"]["cached_tokens"]


def tiny_mmproj(out: Path, seed: int) -> Path:
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out), "--seed", str(seed)], check=True)
    return out


def test_the_identity_is_the_content_of_the_model_and_its_projector(
    model_path: str, tmp_path: Path
) -> None:
    copy = tmp_path / "renamed.gguf"
    shutil.copyfile(model_path, copy)
    twin = str(twin_model())
    assert model_identity(model_path) == model_identity(str(copy))
    assert model_identity(model_path) != model_identity(twin)
    assert model_identity(model_path) != model_identity(model_path, twin)  # as a projector


@pytest.mark.slow
def test_models_sharing_a_disk_tier_never_read_each_others_kv(
    model_path: str, tmp_path: Path
) -> None:
    tier = tmp_path / "kv"
    assert cached_after_restart(Path(model_path), tier) == 0
    assert cached_after_restart(twin_model(), tier) == 0  # same tokens, another model
    copy = tmp_path / "renamed.gguf"
    shutil.copyfile(model_path, copy)
    assert cached_after_restart(copy, tier) > 0  # the same model under another name


@pytest.mark.slow
def test_the_same_model_with_another_projector_never_reads_its_image_kv(
    model_path: str, tmp_path: Path
) -> None:
    tier = tmp_path / "kv"
    first, second = tiny_mmproj(tmp_path / "a.gguf", 1), tiny_mmproj(tmp_path / "b.gguf", 2)
    assert image_cached_after_restart(model_path, first, tier) == 0
    assert image_cached_after_restart(model_path, second, tier) == 0  # other image embeddings
    assert image_cached_after_restart(model_path, first, tier) > 0
