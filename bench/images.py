"""Image scenario (issue 5): the same image asked about with three different questions.

Each request is one user message, the image first and then the question, so a re-ask can reuse
the KV of everything up to the end of the image and computes only the new question. "cold" is
the same request with cache_prompt=false sent right after the warm one: the image is evaluated
again, but its embeddings come from the vision-encoder cache. What the encoder cache saves is
read from /cache (encoder runs and cache hits over the re-asks) and timed once: the cold request
again, under a cache_salt nobody used (the encoder's output is cached per salt), so the encoder
runs, against the cold request whose encoding was cached.

The image is a fresh random 64x64 PNG each run (64 tokens with the tiny test projector), so no
run starts warm by accident.
"""

from __future__ import annotations

import base64
import io
import os
import uuid
from dataclasses import dataclass

import httpx
from PIL import Image

from bench.client import Result, stream_chat

QUESTIONS = [
    "What is in this picture?",
    "Which colours does it have?",
    "Describe it in three words.",
]
SIZE = 64  # px: the tiny projector's image size (64 tokens per image)


@dataclass(slots=True)
class EncoderSaving:
    hits: int  # encoder-cache hits over the re-asks (warm and cold requests)
    encoded: int  # encoder runs over the re-asks
    cold_cached: float  # TTFT (s) of the cold request, its encoding taken from the cache
    cold_encoded: float  # TTFT (s) of the same request with the encoder run again

    def describe(self) -> str:
        return (
            f"encoder over the image re-asks: {self.encoded} run(s), {self.hits} cache hit(s); "
            f"cold TTFT with the cached encoding {self.cold_cached:.3f} s, "
            f"encoding again {self.cold_encoded:.3f} s "
            f"(difference {self.cold_encoded - self.cold_cached:+.3f} s, one sample each)"
        )


def random_png_data_url(size: int = SIZE) -> str:
    im = Image.frombytes("RGB", (size, size), os.urandom(size * size * 3))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def encoder_stats(base_url: str) -> dict | None:
    """The server's encoder-cache counters, or None if it runs without a projector."""
    r = httpx.get(base_url + "/cache", timeout=60)
    r.raise_for_status()
    return r.json().get("encoder")


def image_reask_with_encoder(
    base_url: str,
) -> tuple[list[tuple[str, Result, Result]], EncoderSaving]:
    before = encoder_stats(base_url)
    if before is None:
        raise RuntimeError("the server has no projector (start it with --mmproj)")
    url = random_png_data_url()

    def messages(question: str) -> list[dict]:
        parts = [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": question},
        ]
        return [{"role": "user", "content": parts}]

    rows = []
    for n, question in enumerate(QUESTIONS, start=1):
        warm = stream_chat(base_url, messages(question))
        # Right after the warm request, so it cannot leave a copy of this prompt for it.
        reference = stream_chat(base_url, messages(question), cache_prompt=False)
        if n > 1:
            rows.append((f"image re-ask, question {n}", warm, reference))
    after = encoder_stats(base_url) or before
    # The last question once more with nothing reused, under a salt nobody used: the encoder
    # runs; against the cold request above, whose encoding came from the cache.
    salt = "bench-" + uuid.uuid4().hex
    encoded = stream_chat(base_url, messages(QUESTIONS[-1]), cache_prompt=False, cache_salt=salt)
    saving = EncoderSaving(
        hits=after["hits"] - before["hits"],
        encoded=after["encoded"] - before["encoded"],
        cold_cached=rows[-1][2].ttft,
        cold_encoded=encoded.ttft,
    )
    return rows, saving


def image_reask(base_url: str) -> list[tuple[str, Result, Result]]:
    """Warm/cold rows for the re-asks; prints what the encoder cache saved."""
    rows, saving = image_reask_with_encoder(base_url)
    print(saving.describe())
    return rows
