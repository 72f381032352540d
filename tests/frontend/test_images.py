"""Images in the web chat, against a real server with the tiny test projector: attach by the
file picker, by paste and by drag-and-drop; thumbnails in the history; the image reused from
the cache on a follow-up."""

from __future__ import annotations

import base64
import io
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import Page, expect

from bench.lib.server_process import ROOT, ServerProcess
from tests.frontend.ui import ChatPage

N_IMAGE = 64  # tokens per 64x64 image with the tiny projector


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    mmproj = tmp_path_factory.mktemp("mmproj") / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(mmproj)], check=True, capture_output=True)
    with ServerProcess("-np", "2", "-c", "4096", "--mmproj", str(mmproj)) as srv:
        yield srv


@pytest.fixture
def chat(page: Page, server: ServerProcess) -> ChatPage:
    page.set_viewport_size({"width": 1280, "height": 800})
    return ChatPage(page, server.base_url)


def png(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), colour).save(out, "PNG")
    return out.getvalue()


def test_an_attached_image_is_shown_and_reused_on_a_follow_up(chat: ChatPage, shot, tmp_path: Path):
    path = tmp_path / "square.png"
    path.write_bytes(png((20, 120, 220)))
    sid = chat.create_session("image")
    chat.open(sid)
    chat.page.locator(".composer input[type=file]").set_input_files(str(path))
    expect(chat.page.locator(".attachments li[data-status=ready]")).to_have_count(1)
    first = chat.say("What is in this picture?")
    thumb = chat.page.locator("article.message.user img.thumb")
    expect(thumb).to_have_count(1)
    expect(thumb).to_have_attribute("src", re.compile(r"^v1/media/media-[0-9a-f]+/content$"))
    assert chat.page.evaluate("(img) => img.naturalWidth", thumb.element_handle()) == 64
    assert int(first.locator(".cachebar").get_attribute("data-prompt")) > N_IMAGE
    second = chat.say("And what colour is it?")
    bar = second.locator(".cachebar")
    cached = int(bar.get_attribute("data-cached"))
    assert cached > N_IMAGE  # the image (and the turn around it) came from the cache
    stored = chat.stored(sid)
    assert stored[0]["content"][0]["type"] == "image_file"
    shot("image-follow-up-cached")


def test_images_can_be_pasted_and_dropped(chat: ChatPage):
    sid = chat.create_session("paste and drop")
    chat.open(sid)
    data = base64.b64encode(png((200, 40, 40))).decode()
    make_file = f"""(name) => {{
        const bytes = Uint8Array.from(atob("{data}"), (c) => c.charCodeAt(0));
        const dt = new DataTransfer();
        dt.items.add(new File([bytes], name, {{ type: "image/png" }}));
        return dt;
    }}"""
    dt = chat.page.evaluate_handle(make_file, "pasted.png")
    paste = (
        "(box, dt) => box.dispatchEvent("
        "new ClipboardEvent('paste', {clipboardData: dt, bubbles: true}))"
    )
    chat.box.evaluate(paste, dt)
    expect(chat.page.locator(".attachments li[data-status=ready]")).to_have_count(1)
    dt = chat.page.evaluate_handle(make_file, "dropped.png")
    chat.page.locator("form.composer").dispatch_event("drop", {"dataTransfer": dt})
    expect(chat.page.locator(".attachments li[data-status=ready]")).to_have_count(2)
    chat.say("Two pictures.")
    expect(chat.page.locator("article.message.user img.thumb")).to_have_count(2)
