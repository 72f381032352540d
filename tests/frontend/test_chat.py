"""The web chat against the real server and model, in a real browser (Debian's chromium)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, Route, expect

from bench.lib.server_process import ServerProcess
from tests.frontend.ui import TIMEOUT_MS, ChatPage

POSITIVE = re.compile(r"^[1-9][0-9]*$")


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "2", "-c", "4096") as srv:
        yield srv


@pytest.fixture
def chat(page: Page, server: ServerProcess) -> ChatPage:
    page.set_viewport_size({"width": 1280, "height": 800})
    return ChatPage(page, server.base_url)


def test_the_page_and_its_assets_are_served_with_the_right_caching(server: ServerProcess):
    index = httpx.get(server.base_url + "/", timeout=10)
    assert index.status_code == 200 and index.headers["cache-control"] == "no-cache"
    bundle = re.search(r'src="(assets/app-[^"]+\.js)"', index.text)
    assert bundle, index.text  # a relative URL, so the UI works behind a path prefix
    js = httpx.get(f"{server.base_url}/{bundle.group(1)}", timeout=10)
    assert js.status_code == 200 and "immutable" in js.headers["cache-control"]
    assert httpx.get(server.base_url + "/favicon.ico", timeout=10).status_code == 200


def test_a_message_streams_its_answer_and_the_second_turn_shows_cached_tokens(chat: ChatPage, shot):
    chat.open()
    # The UI opens the newest chat, or makes one when there is none. Both that one and the chat
    # made below are titled "New chat": wait for the URL to move to the new one, or the settings
    # could go into the first one's panel just before the new chat replaces it.
    expect(chat.page).to_have_url(re.compile(r"#/s/[0-9a-f]{32}$"))
    opened = chat.page.url
    chat.page.get_by_role("button", name="+ New chat").click()
    expect(chat.page).not_to_have_url(opened)
    expect(chat.page.locator("header h1")).to_have_text("New chat")
    # Settings: a small max_tokens keeps the test short; it applies from the next message.
    chat.page.get_by_role("button", name="Settings", exact=True).click()
    chat.page.get_by_label("Max tokens").fill("12")
    chat.page.get_by_role("button", name="Save", exact=True).click()
    expect(chat.page.locator(".notice")).to_contain_text("Settings saved")
    chat.page.get_by_role("button", name="Close panel").click()

    first = chat.say("What is the capital of France?")
    expect(first.locator(".markdown")).not_to_be_empty()
    expect(chat.page.locator("header h1")).to_have_text("What is the capital of France?")
    completion = int(first.locator(".cachebar").get_attribute("data-completion"))
    assert 1 <= completion <= 12
    second = chat.say("And of Italy?")
    bar = second.locator(".cachebar")
    expect(bar).to_have_attribute("data-cached", POSITIVE)
    expect(bar).to_have_attribute("data-source", "own_slot")
    expect(bar.locator(".saved")).to_contain_text("saved")
    cached, prompt = int(bar.get_attribute("data-cached")), int(bar.get_attribute("data-prompt"))
    assert cached >= 0.5 * prompt  # the whole first turn came from the slot's KV
    shot("chat-second-turn-cached")


def test_stop_ends_a_long_reply_the_slot_is_freed_and_the_next_message_works(chat: ChatPage, shot):
    sid = chat.create_session("stop")
    chat.open(sid)

    # The UI sends what the user set; for a reply that surely outlasts the click, the test asks
    # the real server for one that ignores end-of-sequence.
    def long_reply(route: Route) -> None:
        body = json.loads(route.request.post_data or "{}")
        route.continue_(post_data=json.dumps({**body, "max_tokens": 1500, "ignore_eos": True}))

    chat.page.route("**/messages", long_reply)
    chat.type_and_send("Tell me a very long story.")
    live = chat.page.locator("article.message.assistant.streaming .markdown")
    expect(live).not_to_be_empty(timeout=TIMEOUT_MS)
    expect(chat.send_button).to_be_disabled()  # no second message while a reply streams
    expect(chat.page.locator(".live-figures")).to_contain_text("tok/s")  # live speed
    shot("chat-streaming")
    chat.stop_button.click()
    stopped = chat.page.locator("article.message.assistant[data-status=cancelled]")
    expect(stopped).to_be_visible(timeout=TIMEOUT_MS)
    expect(stopped.locator(".tag")).to_have_text("stopped")
    expect(chat.send_button).to_be_enabled()
    shot("chat-stopped")
    chat.page.unroute("**/messages")

    stored = chat.stored(sid)
    assert [m["status"] for m in stored] == ["complete", "cancelled"]
    assert 0 < stored[1]["usage"]["completion_tokens"] < 1500
    reply = chat.say("Thanks. Now say OK.")
    expect(reply).to_have_attribute("data-status", "complete")
    health = httpx.get(chat.base_url + "/health", timeout=10).json()
    assert health["slots_processing"] == 0


def test_a_reload_and_another_browser_show_the_same_conversation(
    chat: ChatPage, page: Page, shot, browser
):
    sid = chat.create_session("persist")
    chat.open(sid)
    chat.say("Name a colour.")
    chat.say("Name a fruit.")
    texts = chat.page.locator("article.message").all_inner_texts()
    chat.page.reload()
    expect(chat.replies).to_have_count(2)
    assert chat.page.locator("article.message").all_inner_texts() == texts
    other = browser.new_context()
    try:
        p2 = other.new_page()
        ChatPage(p2, chat.base_url).open(sid)
        expect(p2.locator("article.message.assistant")).to_have_count(2)
        assert p2.locator("article.message").all_inner_texts() == texts
    finally:
        other.close()
    shot("chat-after-reload")


def test_a_server_error_shows_as_an_error_with_the_servers_message(chat: ChatPage, shot, tmp_path):
    # This server has no projector: an image message is refused with a 400 that says why.
    from PIL import Image

    png = tmp_path / "red.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(png)
    sid = chat.create_session("error")
    chat.open(sid)
    chat.page.locator(".composer input[type=file]").set_input_files(str(png))
    expect(chat.page.locator(".attachments li[data-status=ready]")).to_have_count(1)
    chat.type_and_send("What is in this picture?")
    expect(chat.error).to_contain_text("--mmproj", timeout=TIMEOUT_MS)
    expect(chat.error).to_have_attribute("role", "alert")
    expect(chat.send_button).to_be_enabled()
    assert chat.page.locator("article.message.assistant").count() == 0  # not shown as a reply
    # Nothing is lost: the message and its image stay in the composer to fix or resend.
    expect(chat.box).to_have_value("What is in this picture?")
    expect(chat.page.locator(".attachments li[data-status=ready]")).to_have_count(1)
    assert chat.stored(sid) == []  # refused before anything was stored
    shot("chat-error")


def test_rename_edit_as_a_branch_regenerate_and_delete(chat: ChatPage, shot):
    sid = chat.create_session("to rename")
    chat.open(sid)
    chat.say("Say one word.")
    chat.say("Say another word.")

    item = chat.page.locator(".session.active")
    item.get_by_role("button", name="Rename to rename").click()
    chat.page.get_by_label("New title").fill("renamed")
    chat.page.get_by_label("New title").press("Enter")
    expect(chat.page.locator("header h1")).to_have_text("renamed")
    r = httpx.get(f"{chat.base_url}/v1/sessions/{sid}", timeout=10)
    assert r.json()["title"] == "renamed"

    # Regenerate the last reply: the turn is replaced, nothing added.
    before = chat.replies.nth(1).get_attribute("data-id")
    chat.page.get_by_role("button", name="Regenerate").click()
    expect(chat.send_button).to_be_disabled()
    expect(chat.send_button).to_be_enabled(timeout=TIMEOUT_MS)
    expect(chat.replies).to_have_count(2)
    assert chat.replies.nth(1).get_attribute("data-id") != before
    assert [m["role"] for m in chat.stored(sid)] == ["user", "assistant"] * 2

    # Edit the first message: a new branch, with a note of the cache it gives up.
    chat.page.locator("article.message.user").first.get_by_role("button", name="Edit").click()
    note = chat.page.get_by_role("note")
    expect(note).to_contain_text("given up")
    given_up = int(note.locator("strong").inner_text())
    assert given_up > 0
    shot("chat-edit-note")
    chat.page.get_by_label("Edited message").fill("Say one number.")
    chat.page.get_by_role("button", name="Send as new branch").click()
    expect(chat.page.locator("header h1")).to_have_text("renamed (edit)")
    expect(chat.page.locator(".notice")).to_contain_text(f"{given_up} given up")
    expect(chat.replies).to_have_count(1, timeout=TIMEOUT_MS)
    expect(chat.page.locator("article.message.user")).to_have_text(re.compile("Say one number"))
    assert len(chat.stored(sid)) == 4  # the original conversation is unchanged

    # Delete the original.
    chat.page.once("dialog", lambda d: d.accept())
    chat.page.get_by_role("button", name="Delete renamed", exact=True).click()
    expect(chat.page.get_by_role("button", name="Delete renamed", exact=True)).to_have_count(0)
    assert httpx.get(f"{chat.base_url}/v1/sessions/{sid}", timeout=10).status_code == 404


def test_the_cache_panel_shows_which_conversation_holds_which_slot(chat: ChatPage, shot):
    sid = chat.create_session("slot owner")
    chat.open(sid)
    chat.page.get_by_role("button", name="Cache", exact=True).click()
    slots = chat.page.locator("table.slots tbody tr")
    expect(slots).to_have_count(2)
    expect(chat.page.locator("table.slots")).not_to_contain_text("slot owner")
    chat.say("Hello.")  # the open panel refreshes by itself and shows the new holder
    expect(chat.page.locator("table.slots")).to_contain_text("slot owner")
    expect(chat.page.locator("table.tiers")).to_contain_text("own slot")
    shot("cache-panel")


def test_phone_sized_window_and_dark_theme(chat: ChatPage, shot):
    sid = chat.create_session("phone")
    chat.page.set_viewport_size({"width": 390, "height": 780})
    chat.page.emulate_media(color_scheme="dark")
    chat.open(sid)
    chat.say("Hi.")
    expect(chat.page.locator("nav.sidebar")).not_to_be_in_viewport()
    chat.page.get_by_role("button", name="Conversations", exact=True).click()
    expect(chat.page.locator("nav.sidebar")).to_be_in_viewport(ratio=1)  # slid all the way in
    shot("phone-dark-sidebar")
    chat.page.get_by_role("button", name="Close conversations").click()
    expect(chat.page.locator("nav.sidebar")).not_to_be_in_viewport()
    bg = chat.page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(20, 23, 28)"  # the dark palette
    shot("phone-dark-chat")


def test_a_conversation_is_exported_and_imported_as_json(chat: ChatPage, tmp_path):
    sid = chat.create_session("export me")
    chat.open(sid)
    chat.say("Name a planet.")
    with chat.page.expect_download() as download:
        chat.page.get_by_role("button", name="Export", exact=True).click()
    path = tmp_path / "export.json"
    download.value.save_as(path)
    data = json.loads(path.read_text())
    assert data["title"] == "export me" and [m["role"] for m in data["messages"]] == [
        "user",
        "assistant",
    ]
    chat.page.locator(".sidebar input[type=file]").set_input_files(str(path))
    expect(chat.page.locator(".session.active")).not_to_have_attribute("data-id", sid)
    expect(chat.replies).to_have_count(1)
    imported = re.search(r"#/s/([0-9a-f]+)", chat.page.url)
    assert imported and imported.group(1) != sid
    got = chat.stored(imported.group(1))
    assert [m["content"] for m in got] == [m["content"] for m in data["messages"]]
