"""The documents panel's collection mode and OCR notes against a faked documents API
(Playwright's page.route): the mode switch and what it sends, the full prefix's state as each
state reads (a real server cannot be held in `queued` or `too_long` while the test looks),
the pages read by OCR and those it could not read, and images offered by the file picker.
The real server is driven in test_documents_full_ocr.py."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Locator, Page, Route, expect

from tests.frontend.test_ui_fakes import FakeApi, open_fake

N_CTX = 4096


def prefix(state: str, tokens: int = 0, cached: int = 0) -> dict:
    return {"state": state, "tokens": tokens, "cached_tokens": cached, "n_ctx": N_CTX}


class FakeCollections(FakeApi):
    """The fake API with a collection that has a mode and a full prefix. Switched to full, the
    prefix is queued, then computing, then cached, one step per read of the collection (as the
    panel polls it); a document that becomes ready adds its tokens and queues the prefix again,
    from the second read after it is ready (a server queues it just after the document's end).
    `hold` keeps the prefix in the state it is in."""

    def __init__(self, mode: str = "retrieval", full_prefix: dict | None = None) -> None:
        super().__init__()
        self.collection = {
            "id": "col-1",
            "object": "collection",
            "name": "notes",
            "mode": mode,
            "full_prefix": full_prefix or prefix("empty"),
        }
        self.collections = [self.collection]
        self.mode_patches: list[dict] = []
        self.refuse_full: str | None = None  # a PATCH to full answers this 400 message
        self.hold = False
        self.upload: dict = {}  # what the next upload's document reports once ready
        self.uploaded: list[str] = []
        self.seen: set[str] = set()  # documents read ready, not yet in the prefix
        self.counted: set[str] = set()  # documents whose tokens the prefix holds

    def handle(self, route: Route) -> None:
        req = route.request
        path = re.sub(r"^https?://[^/]+/", "", req.url).split("?")[0]
        if (req.method, path) == ("GET", "v1/collections/col-1"):
            self.advance()
            return self.json(route, self.collection)
        if (req.method, path) == ("PATCH", "v1/collections/col-1"):
            body = json.loads(req.post_data or "{}")
            self.mode_patches.append(body)
            if body.get("mode") == "full" and self.refuse_full:
                error = {"code": "collection_too_long", "param": "mode"}
                return self.json(route, {"error": {**error, "message": self.refuse_full}}, 400)
            self.collection["mode"] = body["mode"]
            if body["mode"] == "full" and self.collection["full_prefix"]["state"] == "empty":
                self.collection["full_prefix"] = prefix("queued", 3412)
            return self.json(route, self.collection)
        super().handle(route)
        if (req.method, path) == ("POST", "v1/collections/col-1/documents"):
            self.uploaded.append(re.search(rb'filename="([^"]+)"', req.post_data_buffer)[1])
            self.documents[-1].update(self.upload)  # as the next reads list it
        return None

    def advance(self) -> None:
        fp = self.collection["full_prefix"]
        for d in self.documents:
            if d["status"] == "ready" and d["id"] not in self.counted:
                if d["id"] not in self.seen:  # the prefix is queued a moment after the document
                    self.seen.add(d["id"])
                    return
                self.counted.add(d["id"])
                fp.update(state="queued", tokens=fp["tokens"] + 1000, cached_tokens=0)
                return
        if self.hold or self.collection["mode"] != "full":
            return
        if fp["state"] == "queued":
            fp.update(state="computing", cached_tokens=fp["tokens"] // 2)
        elif fp["state"] == "computing":
            fp.update(state="cached", cached_tokens=fp["tokens"])


def open_panel(page: Page, url: str, api: FakeApi) -> Locator:
    """The page with the Documents panel open; returns the collection's item."""
    open_fake(page, url, api)
    page.get_by_role("button", name="Documents", exact=True).click()
    panel = page.get_by_role("region", name="Documents", exact=True)
    return panel.locator("li.collection").filter(has_text="notes")


def test_the_mode_switch_patches_the_collection_and_its_prefix_shows_cached(
    page: Page, static_url: str, shot
):
    api = FakeCollections()
    collection = open_panel(page, static_url, api)
    retrieval = collection.get_by_role("radio", name="Retrieval")
    full = collection.get_by_role("radio", name="Full document")
    expect(retrieval).to_be_checked()
    status = collection.locator(".prefix")
    expect(status).to_have_count(0)  # retrieval: no prefix to speak of
    full.check()
    # Queued, computing, cached: one step per read, so the panel polled until it was cached.
    expect(status).to_have_text("full prefix: 3,412 tokens, cached")
    expect(status).to_have_attribute("data-state", "cached")
    assert api.mode_patches == [{"mode": "full"}]
    expect(full).to_be_checked()
    shot("fake-collection-full-cached")
    with page.expect_response(re.compile(r"/v1/collections/col-1$")):
        retrieval.check()
    expect(status).to_have_count(0)
    assert api.mode_patches == [{"mode": "full"}, {"mode": "retrieval"}]
    # The mode is the server's: a reload shows what it stored.
    api.collection["mode"] = "full"
    page.reload()
    page.get_by_role("button", name="Documents", exact=True).click()
    expect(collection.get_by_role("radio", name="Full document")).to_be_checked()
    expect(status).to_have_text("full prefix: 3,412 tokens, cached")


STATES = [
    (prefix("empty"), "full prefix: empty (no document ready yet)"),
    (prefix("queued", 3412), "full prefix: 3,412 tokens, queued…"),
    (prefix("computing", 3412, 1024), "full prefix: computing… 1,024 of 3,412 tokens"),
    (prefix("cached", 3412, 3412), "full prefix: 3,412 tokens, cached"),
    (prefix("too_long", 5100), "full prefix: too long for the context (5,100 > 4,096 tokens)"),
    (prefix("failed", 3412), "full prefix: failed"),
]


@pytest.mark.parametrize(("full_prefix", "text"), STATES, ids=[s[0]["state"] for s in STATES])
def test_each_state_of_the_full_prefix_reads_plainly(
    page: Page, static_url: str, shot, full_prefix: dict, text: str
):
    api = FakeCollections(mode="full", full_prefix=full_prefix)
    api.hold = True
    collection = open_panel(page, static_url, api)
    status = collection.locator(".prefix")
    expect(status).to_have_text(text)
    expect(status).to_have_attribute("data-state", full_prefix["state"])
    if full_prefix["state"] in ("computing", "too_long"):
        shot(f"fake-collection-prefix-{full_prefix['state']}")


def test_a_refused_switch_says_why_and_stays_on_retrieval(page: Page, static_url: str):
    api = FakeCollections()
    api.refuse_full = "the collection is 5,100 tokens: 1,004 more than the context of 4,096 tokens"
    collection = open_panel(page, static_url, api)
    # A click, not check(): the refusal may turn the switch back before check() looks at it.
    collection.get_by_role("radio", name="Full document").click()
    expect(page.locator(".notice.error")).to_contain_text("1,004 more than the context")
    expect(collection.get_by_role("radio", name="Retrieval")).to_be_checked()
    expect(collection.get_by_role("radio", name="Full document")).not_to_be_checked()
    assert api.mode_patches == [{"mode": "full"}]


def test_a_new_document_in_full_mode_recomputes_the_prefix(page: Page, static_url: str, tmp_path):
    api = FakeCollections(mode="full", full_prefix=prefix("cached", 3412, 3412))
    collection = open_panel(page, static_url, api)
    status = collection.locator(".prefix")
    expect(status).to_have_text("full prefix: 3,412 tokens, cached")
    doc = tmp_path / "handbook.pdf"
    doc.write_bytes(b"%PDF-1.4 fake")
    collection.locator("input[type=file]").set_input_files(str(doc))
    expect(collection.locator("li.document[data-status]")).to_have_attribute("data-status", "ready")
    # Ingestion's end is followed by the prefix: queued again, computed, cached, 1,000 more.
    expect(status).to_have_text("full prefix: 4,412 tokens, cached")


def test_ocr_pages_and_pages_ocr_could_not_read_show_per_document(
    page: Page, static_url: str, shot
):
    api = FakeCollections()
    base = {"object": "document", "status": "ready", "n_chunks": 4, "error": None}
    api.documents = [
        {**base, "id": "doc-1", "filename": "scan.pdf", "ocr_pages": [1, 2, 3, 5]},
        {
            **base,
            "id": "doc-2",
            "filename": "receipts.pdf",
            "ocr_pages": [1, 3],
            "ocr_failed": [{"page": 2, "reason": "OCR took longer than 30 s"}],
        },
        {**base, "id": "doc-3", "filename": "notes.txt", "ocr_pages": []},
    ]
    collection = open_panel(page, static_url, api)
    rows = collection.locator("li.document")
    expect(rows.filter(has_text="scan.pdf").locator(".ocr-pages")).to_have_text("OCR: pages 1–3, 5")
    receipts = rows.filter(has_text="receipts.pdf")
    expect(receipts.locator(".ocr-pages")).to_have_text("OCR: pages 1, 3")
    failed = receipts.get_by_role("list", name="Pages of receipts.pdf OCR could not read")
    expect(failed.locator("li.warning")).to_have_text(
        ["⚠ page 2 not read: OCR took longer than 30 s"]
    )
    expect(rows.filter(has_text="notes.txt").locator(".ocr")).to_have_count(0)
    shot("fake-documents-ocr")


def test_the_file_picker_offers_images_and_a_photo_is_uploaded(
    page: Page, static_url: str, tmp_path
):
    api = FakeCollections()
    api.upload = {"filename": "page.png", "ocr_pages": [1]}
    collection = open_panel(page, static_url, api)
    picker = collection.locator("input[type=file]")
    accept = picker.get_attribute("accept") or ""
    for kind in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", "image/png", "image/jpeg"):
        assert kind in accept.split(","), (kind, accept)
    photo = tmp_path / "page.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n fake")
    picker.set_input_files(str(photo))
    row = collection.locator("li.document[data-status]")
    expect(row).to_have_attribute("data-status", "ready")
    expect(row.locator(".ocr-pages")).to_have_text("OCR: page 1")
    assert api.uploaded == [b"page.png"]
