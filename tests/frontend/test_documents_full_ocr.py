"""Scans and full-document mode in the web chat against the real server, OCR engine, embedder
and model: a scanned PDF (pages that are only images) and a photographed page are uploaded,
show the pages OCR read, and answer with page citations; a collection switched to Full
document in the panel shows its prefix computed and cached. The faked states are in
test_documents_modes_fakes.py."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from playwright.sync_api import Page, expect

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually
from tests.frontend.ui import TIMEOUT_MS, ChatPage

pytestmark = pytest.mark.needs_documents_api

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # Debian's fonts-dejavu-core
COVER = "Harbour archive of Porto Velho. Inventory of the old customs house, second edition."
LEDGER = "The harbour ledger of 1897 is kept in cabinet number forty two, behind the blue door."
RECEIPT = "Receipt: the lighthouse keeper was paid in copper coins for the winter of 1903."


def scanned_page(text: str, skew: float = 0.0) -> Image.Image:
    """A page as a scanner or a phone sees it: text rendered at 150 dpi, a little skewed and
    blurred; no text layer anywhere."""
    page = Image.new("L", (1240, 1754), 255)
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(FONT, 34)
    words, line, y = text.split(), "", 160
    for word in words:  # wrapped at the page's width
        if draw.textlength(f"{line} {word}", font=font) > 1040 and line:
            draw.text((100, y), line, font=font, fill=0)
            line, y = word, y + 52
        else:
            line = f"{line} {word}".strip()
    draw.text((100, y), line, font=font, fill=0)
    return page.rotate(skew, expand=False, fillcolor=255).filter(ImageFilter.GaussianBlur(0.6))


def scanned_pdf(pages: list[str]) -> bytes:
    images = [scanned_page(t).convert("RGB") for t in pages]
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=150, save_all=True, append_images=images[1:])
    return out.getvalue()


def photo(text: str) -> bytes:
    out = io.BytesIO()
    scanned_page(text, skew=1.5).convert("RGB").save(out, "JPEG", quality=70)
    return out.getvalue()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "4096") as srv:
        yield srv


def open_documents(page: Page, base_url: str, title: str):
    page.set_viewport_size({"width": 1280, "height": 800})
    chat = ChatPage(page, base_url)
    chat.open(chat.create_session(title, max_tokens=16))
    page.get_by_role("button", name="Documents", exact=True).click()
    return chat, page.get_by_role("region", name="Documents", exact=True)


def test_a_scanned_pdf_and_a_photographed_page_are_answered_with_page_citations(
    page: Page, server: ServerProcess, shot, tmp_path: Path
):
    chat, panel = open_documents(page, server.base_url, "scans")
    panel.get_by_label("New collection name").fill("archive")
    panel.get_by_role("button", name="Create").click()
    collection = panel.locator("li.collection").filter(has_text="archive")
    expect(collection).to_have_count(1)
    scan = tmp_path / "scan.pdf"
    scan.write_bytes(scanned_pdf([COVER, LEDGER]))
    snap = tmp_path / "photo.jpg"
    snap.write_bytes(photo(RECEIPT))
    collection.locator("input[type=file]").set_input_files([str(scan), str(snap)])
    expect(collection.locator("li.document.uploading")).to_have_count(0, timeout=TIMEOUT_MS)
    expect(chat.error).to_have_count(0)  # both accepted (a refusal shows the server's reason)
    rows = collection.locator("li.document[data-status]")
    for name in ("scan.pdf", "photo.jpg"):
        row = rows.filter(has_text=name)
        expect(row).to_have_attribute("data-status", "ready", timeout=TIMEOUT_MS)
    expect(rows.filter(has_text="scan.pdf").locator(".ocr-pages")).to_have_text("OCR: pages 1–2")
    expect(rows.filter(has_text="photo.jpg").locator(".ocr-pages")).to_have_text("OCR: page 1")
    expect(collection.locator(".ocr-failed")).to_have_count(0)
    collection.get_by_label("Answer from archive").check()
    shot("documents-ocr-ready")

    reply = chat.say("Which cabinet keeps the harbour ledger of 1897?")
    chips = reply.locator(".citations .chip")
    ledger = chips.filter(has_text="scan.pdf p. 2")
    expect(ledger).to_have_count(1)
    expect(chips.filter(has_text="photo.jpg p. 1")).to_have_count(1)
    ledger.click()
    passage = reply.get_by_role("dialog", name=re.compile(r"Source \d+"))
    expect(passage).to_contain_text("page 2")
    expect(passage).to_contain_text(re.compile(r"cabinet", re.IGNORECASE))
    shot("documents-ocr-citation-open")


MANUAL = " ".join(
    f"Section {n}. The pump of station {n} is serviced every {n + 2} weeks; its filter is "
    f"rinsed in fresh water and its log is signed by the engineer on duty."
    for n in range(1, 13)
)


def test_full_document_mode_is_switched_in_the_panel_and_its_prefix_shows_cached(
    page: Page, server: ServerProcess, shot
):
    base = server.base_url
    col = httpx.post(f"{base}/v1/collections", json={"name": "manual"}, timeout=30).json()
    assert col.get("mode") == "retrieval", col
    r = httpx.post(
        f"{base}/v1/collections/{col['id']}/documents",
        json={"filename": "manual.txt", "text": MANUAL},
        timeout=30,
    )
    assert r.status_code == 202, r.text
    doc = r.json()["id"]

    def ingested() -> str | None:
        status = httpx.get(f"{base}/v1/documents/{doc}", timeout=30).json()["status"]
        return status if status in ("ready", "error") else None

    assert eventually(ingested, f"document {doc} to be ingested") == "ready"
    chat, panel = open_documents(page, base, "full")
    collection = panel.locator("li.collection").filter(has_text="manual")
    expect(collection.get_by_role("radio", name="Retrieval")).to_be_checked()
    collection.get_by_role("radio", name="Full document").check()
    status = collection.locator(".prefix")
    expect(status).to_have_attribute("data-state", "cached", timeout=TIMEOUT_MS)
    stored = httpx.get(f"{base}/v1/collections/{col['id']}", timeout=30).json()
    assert stored["mode"] == "full"
    assert stored["full_prefix"]["state"] == "cached"
    tokens = stored["full_prefix"]["tokens"]
    assert tokens > 0
    expect(status).to_have_text(f"full prefix: {tokens:,} tokens, cached")
    shot("documents-full-cached")
    # The mode is the collection's, kept by the server: a reload shows it.
    page.reload()
    page.get_by_role("button", name="Documents", exact=True).click()
    expect(collection.get_by_role("radio", name="Full document")).to_be_checked()
    expect(status).to_have_text(f"full prefix: {tokens:,} tokens, cached")
    collection.get_by_label("Answer from manual").check()
    chat.say("How often is the pump of station 7 serviced?")
    expect(chat.error).to_have_count(0)
