"""Images through a real server with the tiny test projector (scripts/make_tiny_mmproj.py)."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from bench.lib.server_process import ROOT, ServerProcess

N_IMAGE = 64  # tokens per 64x64 image with the tiny projector


@pytest.fixture(scope="module")
def mmproj(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    return str(out)


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory) -> Path:
    """--media-path: a picture in a subfolder, and a file beside the folder (out of reach)."""
    root = tmp_path_factory.mktemp("media")
    (root / "inside" / "pics").mkdir(parents=True)
    (root / "inside" / "pics" / "p.png").write_bytes(encoded(picture(61)))
    (root / "outside.png").write_bytes(encoded(picture(62)))
    return root / "inside"


@pytest.fixture(scope="module")
def server(mmproj: str, media_dir: Path) -> Iterator[ServerProcess]:
    with ServerProcess(
        "-np", "2", "-c", "4096", "--mmproj", mmproj, "--image-max-pixels", "262144",
        "--media-path", str(media_dir),
    ) as srv:  # fmt: skip
        yield srv


def picture(seed: int, size: tuple[int, int] = (64, 64)) -> Image.Image:
    im = Image.new("RGB", size)
    im.putdata(
        [((x * 7 + seed) % 256, (x * 3) % 256, seed % 256) for x in range(size[0] * size[1])]
    )
    return im


def encoded(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def image_part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def chat(server: ServerProcess, messages: list[dict], max_tokens: int = 6) -> httpx.Response:
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
    return httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=120)


def ask(server: ServerProcess, parts: list[dict], history: list[dict] | None = None) -> dict:
    r = chat(server, [*(history or []), {"role": "user", "content": parts}])
    assert r.status_code == 200, r.text
    return r.json()


def cached(out: dict) -> int:
    return out["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_the_same_image_again_is_reused_and_another_image_is_not(server: ServerProcess):
    a, b = data_url(encoded(picture(11))), data_url(encoded(picture(12)))
    parts = lambda url: [image_part(url), {"type": "text", "text": "What is this?"}]  # noqa: E731
    first = ask(server, parts(a))
    again = ask(server, parts(a))
    # An exact repeat: all of it, the first token from the logits its slot kept.
    assert cached(again) == first["usage"]["prompt_tokens"]
    other = ask(server, parts(b))
    # Same size, same text around it: only the text before the image may come from the cache.
    assert cached(other) < first["usage"]["prompt_tokens"] - N_IMAGE - 3


def test_the_same_pixels_in_another_lossless_encoding_hit(server: ServerProcess):
    im = picture(21)
    png = ask(server, [image_part(data_url(encoded(im))), {"type": "text", "text": "Colour?"}])
    webp = data_url(encoded(im, "WEBP", lossless=True), "image/webp")
    again = ask(server, [image_part(webp), {"type": "text", "text": "Colour?"}])
    assert cached(again) == png["usage"]["prompt_tokens"]  # the same prompt: all of it


def test_a_follow_up_turn_reuses_the_image_and_the_history(server: ServerProcess):
    url = data_url(encoded(picture(31)))
    turn1 = [{"role": "user", "content": [image_part(url), {"type": "text", "text": "Shape?"}]}]
    first = chat(server, turn1).json()
    history = [
        *turn1,
        {"role": "assistant", "content": first["choices"][0]["message"]["content"]},
        {"role": "user", "content": "And the colour?"},
    ]
    second = chat(server, history).json()
    previous = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
    assert cached(second) >= 0.9 * previous


def test_an_image_after_different_text_is_not_taken_for_a_cached_one(server: ServerProcess):
    url = data_url(encoded(picture(41)))
    first = ask(server, [{"type": "text", "text": "Look:"}, image_part(url)])
    moved = ask(server, [{"type": "text", "text": "See here, now:"}, image_part(url)])
    # The image sits at other positions after other text: it is evaluated again.
    assert cached(moved) < first["usage"]["prompt_tokens"] - N_IMAGE


def test_an_uploaded_image_is_the_same_image(server: ServerProcess):
    data = encoded(picture(51))
    up = httpx.post(
        server.base_url + "/v1/media", content=data, headers={"Content-Type": "image/png"}
    )
    assert up.status_code == 201, up.text
    inline = ask(server, [image_part(data_url(data)), {"type": "text", "text": "Hm?"}])
    by_id = {"type": "image_file", "image_file": {"file_id": up.json()["id"]}}
    again = ask(server, [by_id, {"type": "text", "text": "Hm?"}])
    assert cached(again) == inline["usage"]["prompt_tokens"]  # the same prompt: all of it


@pytest.mark.parametrize(
    ("url", "words"),
    [
        (data_url(b"not an image"), "not an image"),
        (data_url(encoded(picture(1))[:80]), "corrupt"),
        (data_url(encoded(picture(1), "BMP"), "image/bmp"), "not supported"),
        (data_url(encoded(picture(1, (1024, 1024)))), "pixels"),
        ("https://example.com/cat.png", "remote"),
        ("data:image/png;base64,%%%", "base64"),
    ],
)
def test_bad_images_are_refused_and_the_server_stays_up(
    server: ServerProcess, url: str, words: str
):
    r = chat(server, [{"role": "user", "content": [image_part(url)]}])
    assert r.status_code == 400, r.text
    assert words in r.json()["error"]["message"]
    assert httpx.get(server.base_url + "/health").json()["status"] == "ok"


def test_a_file_url_under_the_media_path_is_the_same_image(server: ServerProcess):
    url = data_url(encoded(picture(61)))
    inline = ask(server, [image_part(url), {"type": "text", "text": "?"}])
    for url in ("file://pics/p.png", "file:////pics//p.png"):  # slashes mean nothing more
        again = ask(server, [image_part(url), {"type": "text", "text": "?"}])
        assert cached(again) == inline["usage"]["prompt_tokens"]  # the same prompt: all of it


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("file://pics/missing.png", "does not exist"),
        ("file://../outside.png", "not allowed"),
        ("file://pics/../../outside.png", "not allowed"),
    ],
)
def test_a_file_url_outside_the_media_path_or_missing_is_refused(
    server: ServerProcess, url: str, words: str
):
    r = chat(server, [{"role": "user", "content": [image_part(url)]}])
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert words in error["message"] and error["param"] == "messages.0.content"


def test_an_unknown_uploaded_id_is_refused(server: ServerProcess):
    part = {"type": "image_file", "image_file": {"file_id": "media-000000000000000000000000"}}
    r = chat(server, [{"role": "user", "content": [part]}])
    assert r.status_code == 400 and "no uploaded media" in r.json()["error"]["message"]


def test_without_a_projector_images_are_refused_naming_the_flag(tmp_path: Path):
    with ServerProcess("-np", "1", "-c", "1024") as srv:
        r = chat(srv, [{"role": "user", "content": [image_part(data_url(encoded(picture(1))))]}])
        assert r.status_code == 400 and "--mmproj" in r.json()["error"]["message"]


def test_a_session_keeps_its_image_by_reference_and_reuses_it(server: ServerProcess):
    base = server.base_url
    sid = httpx.post(base + "/v1/sessions", json={"system_prompt": "Be brief."}).json()["id"]
    url = data_url(encoded(picture(61)))
    turn = f"{base}/v1/sessions/{sid}/messages"
    body = {"content": [image_part(url), {"type": "text", "text": "What is it?"}]}
    first = httpx.post(turn, json={**body, "max_tokens": 6, "temperature": 0}, timeout=120)
    assert first.status_code == 200, first.text
    second = httpx.post(turn, json={"content": "Sure?", "max_tokens": 6}, timeout=120).json()
    u1 = first.json()["usage"]
    assert cached(second) >= 0.9 * (u1["prompt_tokens"] + u1["completion_tokens"])
    stored = httpx.get(f"{base}/v1/sessions/{sid}").json()["messages"]
    image = stored[0]["content"][0]
    assert image["type"] == "image_file" and image["image_file"]["file_id"].startswith("media-")


def encoder_stats(server: ServerProcess) -> dict:
    stats = httpx.get(server.base_url + "/cache").json()["encoder"]
    assert stats is not None and stats["budget_bytes"] > 0
    return stats


def test_an_image_whose_kv_cannot_be_reused_skips_the_encoder(server: ServerProcess):
    url = data_url(encoded(picture(71)))
    ask(server, [{"type": "text", "text": "Look:"}, image_part(url)])
    before = encoder_stats(server)
    assert before["entries"] >= 1 and before["bytes"] > 0
    # Other text before it: the image's KV sits at other positions and is evaluated again, but
    # its embeddings come from the encoder cache.
    ask(server, [{"type": "text", "text": "See here, now:"}, image_part(url)])
    after = encoder_stats(server)
    assert after["hits"] >= before["hits"] + 1
    assert after["encoded"] == before["encoded"]
    ask(server, [{"type": "text", "text": "Look:"}, image_part(data_url(encoded(picture(72))))])
    new = encoder_stats(server)
    assert new["encoded"] == after["encoded"] + 1
    assert new["misses"] >= after["misses"] + 1
