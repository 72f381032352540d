"""Image scenario: the same image asked about with three different questions.

Each request is a short system message and one user message, the image first and then the
question, so a re-ask can reuse the KV of everything up to the end of the image and computes only
the new question. "cold" is sent right after the warm one with nothing reused (`python -m
bench`: the same request with cache_prompt=false; the comparison: a nonce at the start of the
system message): the image is evaluated again, but on our server its embeddings come from the
vision-encoder cache. What the encoder cache saves is
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

from bench.lib.client import stream_chat
from bench.lib.core import Cold, Row, cache_off

QUESTIONS = [
    "What is in this picture?",
    "Which colours does it have?",
    "Describe it in three words.",
]
SYSTEM = "You describe pictures."
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


def image_reask(base_url: str, cold: Cold = cache_off, url: str | None = None) -> list[Row]:
    """Warm/cold rows for questions 2 and 3 about one image (any server with a projector)."""
    url = url or random_png_data_url()

    def messages(question: str) -> list[dict]:
        parts = [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": question},
        ]
        # A system message of its own: without one the chat template may put a default system
        # prompt first, which a cold reference's nonce (core.fresh_prefix) would come after.
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": parts}]

    rows = []
    for n, question in enumerate(QUESTIONS, start=1):
        warm = stream_chat(base_url, messages(question))
        # Right after the warm request, so it cannot leave a copy of this prompt for it.
        reference = cold(base_url, messages(question))
        if n > 1:
            rows.append((f"image re-ask, question {n}", warm, reference))
    return rows


def image_reask_with_encoder(base_url: str) -> tuple[list[Row], EncoderSaving]:
    """The re-asks on our server (cold = cache_prompt false), and what the encoder cache saved."""
    before = encoder_stats(base_url)
    if before is None:
        raise RuntimeError("the server has no projector (start it with --mmproj)")
    url = random_png_data_url()
    rows = image_reask(base_url, cache_off, url)
    after = encoder_stats(base_url) or before
    # The last question once more with nothing reused, under a salt nobody used: the encoder
    # runs; against the cold request above, whose encoding came from the cache.
    salt = "bench-" + uuid.uuid4().hex
    parts = [
        {"type": "image_url", "image_url": {"url": url}},
        {"type": "text", "text": QUESTIONS[-1]},
    ]
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": parts}]
    encoded = stream_chat(base_url, messages, cache_prompt=False, cache_salt=salt)
    saving = EncoderSaving(
        hits=after["hits"] - before["hits"],
        encoded=after["encoded"] - before["encoded"],
        cold_cached=rows[-1][2].ttft,
        cold_encoded=encoded.ttft,
    )
    return rows, saving
