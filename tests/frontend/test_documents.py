"""Documents in the web chat against the real server, embedder and model: upload a document,
ask from its collection, open a citation. The documents API is part of the product:
a server whose GET /v1/collections answers 404 fails this test, it is not skipped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually
from tests.frontend.ui import TIMEOUT_MS, ChatPage

pytestmark = pytest.mark.needs_documents_api

FACT = "The kvchat mascot is a teal otter named Pebble who lives in Lisbon."


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    # Blend is off on the packaged SmolLM2 by its quality gate; the cache bar of a blended turn
    # is what the last test shows.
    with ServerProcess("-np", "2", "-c", "4096", "--blend-force") as srv:
        yield srv


def test_upload_a_document_ask_and_open_a_citation(
    page: Page, server: ServerProcess, shot, tmp_path: Path
):
    listed = httpx.get(server.base_url + "/v1/collections", timeout=30)
    assert listed.status_code == 200, (
        f"GET /v1/collections answered {listed.status_code}: the documents API is missing"
    )
    page.set_viewport_size({"width": 1280, "height": 800})
    chat = ChatPage(page, server.base_url)
    sid = chat.create_session("documents", max_tokens=16)
    chat.open(sid)
    page.get_by_role("button", name="Documents", exact=True).click()
    panel = page.get_by_role("region", name="Documents", exact=True)
    panel.get_by_label("New collection name").fill("mascots")
    panel.get_by_role("button", name="Create").click()
    collection = panel.locator("li.collection").filter(has_text="mascots")
    expect(collection).to_have_count(1)
    doc = tmp_path / "mascot.txt"
    doc.write_text(f"About the project.\n\n{FACT}\n\nIt likes caching.\n")
    collection.locator("input[type=file]").set_input_files(str(doc))
    row = collection.locator("li.document[data-status]").filter(has_text="mascot.txt")
    expect(row).to_have_attribute("data-status", "ready", timeout=TIMEOUT_MS)
    collection.get_by_label("Answer from mascots").check()
    shot("documents-ready")

    reply = chat.say("What is the kvchat mascot?")
    chip = reply.locator(".citations .chip").first
    expect(chip).to_contain_text("mascot.txt")
    chip.click()
    passage = reply.get_by_role("dialog", name=re.compile(r"Source \d+"))
    expect(passage).to_contain_text("teal otter named Pebble")
    expect(passage).to_contain_text("mascot.txt")
    shot("documents-citation-open")
    # A reload shows the same citations (they are stored with the reply).
    page.reload()
    expect(page.locator("article.message.assistant .citations .chip").first).to_contain_text(
        "mascot.txt"
    )


OTTER = (
    "Pebble the teal otter keeps the kvchat cache tidy. Every morning Pebble sorts the slots, "
    "sweeps stale prefixes off the host memory tier and writes the disk tier's index by hand. "
    "In the afternoon Pebble swims in the Tagus river and eats sardines with the maintainers."
)
POSITIVE = re.compile(r"^[1-9][0-9]*$")


def test_a_document_turn_shows_the_users_words_its_sources_folded_and_blend(
    page: Page, server: ServerProcess, shot
):
    base = server.base_url
    col = httpx.post(f"{base}/v1/collections", json={"name": "otters"}, timeout=30).json()["id"]
    r = httpx.post(
        f"{base}/v1/collections/{col}/documents",
        json={"filename": "otter.txt", "text": OTTER},
        timeout=30,
    )
    assert r.status_code == 202, r.text
    doc = r.json()["id"]

    def ingested() -> str | None:
        status = httpx.get(f"{base}/v1/documents/{doc}", timeout=30).json()["status"]
        return status if status in ("ready", "error") else None

    assert eventually(ingested, f"document {doc} to be ingested") == "ready"
    # The chunk's own KV, computed once by a blend question: a session turn then places it.
    ask = {"question": "Who is Pebble?", "max_tokens": 1, "kv_reuse": "blend"}
    assert httpx.post(f"{base}/v1/collections/{col}/ask", json=ask, timeout=180).is_success

    page.set_viewport_size({"width": 1280, "height": 800})
    chat = ChatPage(page, base)
    chat.open(chat.create_session("otters", max_tokens=4))
    page.get_by_role("button", name="Documents", exact=True).click()
    panel = page.get_by_role("region", name="Documents", exact=True)
    panel.get_by_label("Answer from otters").check()
    panel.get_by_label("Reuse of the sources' cache").select_option("blend")

    question = "Where does Pebble swim?"
    reply = chat.say(question)
    asked = page.locator("article.message.user").last
    # The user's own words, not the injected "Sources: ... Question: ..." prompt text.
    expect(asked.locator(".plain")).to_have_text(question)
    expect(asked).not_to_contain_text("Sources:")
    expect(asked).not_to_contain_text("Question:")
    sources = asked.locator("details.sources")
    expect(sources.locator("summary")).to_contain_text("otter.txt")
    passage = sources.get_by_label(re.compile(r"Source \d+"))
    expect(passage).to_be_hidden()  # folded until opened
    sources.locator("summary").click()
    expect(passage).to_contain_text("Tagus river")
    # The reply's cache bar: the turn blended the chunk's KV, shown apart from a cached prefix.
    bar = reply.locator(".cachebar")
    expect(bar).to_have_attribute("data-kv-reuse", "blend")
    expect(bar).to_have_attribute("data-blended", POSITIVE)
    expect(bar.locator(".reuse")).to_contain_text("blend:")
    expect(bar.locator(".seg.chunk")).to_have_count(1)
    shot("documents-turn-sources-blend")
    # A reload shows the same (the server returns the user's words apart from the sources).
    page.reload()
    expect(page.locator("article.message.user .plain").last).to_have_text(question)
    expect(page.locator(".cachebar").last).to_have_attribute("data-kv-reuse", "blend")
