"""The web chat on a real router (`--models-dir`: the packaged model, its twin with the same
tokenizer and random weights, and a file llama.cpp cannot load; at most one model loaded, so
every switch unloads one and loads the other): the UI picks a model per conversation, chats with
both, and every turn names its conversation's model."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from bench.lib.server_process import ServerProcess
from bench.lib.twin_model import twin_model
from tests.frontend.ui import TIMEOUT_MS, ChatPage

pytestmark = pytest.mark.slow  # model servers start and switch

SESSION_ID = re.compile(r"#/s/([0-9a-f]{32})$")


@pytest.fixture(scope="module")
def router(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("models")
    (folder / "smollm2.gguf").symlink_to(model_path)
    (folder / "twin.gguf").symlink_to(twin_model())
    (folder / "broken.gguf").write_bytes(b"GGUF not really")  # listed first
    data = tmp_path_factory.mktemp("data")  # kept by pytest: the models' logs under models/
    args = ("--models-dir", str(folder), "--models-max", "1", "-np", "2", "-c", "2048")
    args += ("--data-dir", str(data))
    with ServerProcess(*args) as server:
        yield server


def statuses(server: ServerProcess) -> dict[str, str]:
    data = httpx.get(server.base_url + "/models", timeout=30).json()["data"]
    return {m["id"]: m["status"]["value"] for m in data}


class Turns:
    """The model each turn the page sends names (its body's `model`), and the `model` of the
    chunks that answered it (the model's server names itself in every chunk)."""

    def __init__(self, page: Page) -> None:
        self.asked: list[str | None] = []
        self.answered: list[set[str]] = []
        page.on("request", self.sent)
        page.on("requestfinished", self.done)

    def sent(self, request: Request) -> None:
        if request.method == "POST" and request.url.split("?")[0].endswith("/messages"):
            self.asked.append(json.loads(request.post_data or "{}").get("model"))

    def done(self, request: Request) -> None:
        if request.method == "POST" and request.url.split("?")[0].endswith("/messages"):
            response = request.response()
            text = response.text() if response is not None and response.ok else ""
            chunks = [json.loads(x[5:]) for x in text.split("\n") if x.startswith("data: {")]
            self.answered.append({c["model"] for c in chunks if "model" in c})


def start_chat(chat: ChatPage) -> None:
    """A new chat with short replies (max_tokens 12, set as a user does)."""
    page = chat.page
    page.get_by_role("button", name="Settings", exact=True).click()
    page.get_by_label("Max tokens").fill("12")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".notice")).to_contain_text("Settings saved")
    page.get_by_role("button", name="Close panel").click()


def session_id(page: Page) -> str:
    m = SESSION_ID.search(page.url)
    assert m, page.url
    return m.group(1)


def test_the_ui_switches_models_and_chats_with_both(page: Page, router: ServerProcess, shot):
    page.set_viewport_size({"width": 1280, "height": 800})
    chat = ChatPage(page, router.base_url)
    turns = Turns(page)
    chat.open()
    # Nothing was loaded: the page's first read named the first model, which cannot load; it
    # read through the next one instead, and made a first chat on it.
    expect(page).to_have_url(SESSION_ID, timeout=TIMEOUT_MS)
    picker = page.get_by_role("combobox", name="Model", exact=True)
    expect(picker).to_have_value("smollm2")
    expect(picker.locator("option[value=broken]")).to_have_text("broken (failed)")
    first = session_id(page)
    start_chat(chat)

    chat.say("What is the capital of France?")
    assert turns.asked == ["smollm2"] and turns.answered == [{"smollm2"}]
    assert statuses(router)["smollm2"] == "loaded"
    page.get_by_role("button", name="Cache", exact=True).click()  # one model's slots
    cache = page.get_by_role("region", name="Slots and cache")
    expect(cache.locator("h2")).to_have_text("Slots and cache of smollm2")
    expect(cache.locator("table.slots")).to_contain_text("What is the capital of France?")
    page.get_by_role("button", name="Close panel").click()

    # Model B for the same conversation: picking it loads it (and unloads A: one at a time).
    picker.select_option("twin")
    loading = page.locator(".model-banner.loading")
    try:
        expect(loading).to_contain_text("Loading model twin", timeout=5000)
        shot("router-model-loading")
    except AssertionError:
        pass  # loaded before the page looked: the fake-router tests show this state
    expect(page.locator("header .model-status")).to_have_text("loaded", timeout=TIMEOUT_MS)
    shot("router-model-picker")
    chat.say("And of Italy?")
    assert turns.asked == ["smollm2", "twin"] and turns.answered[1] == {"twin"}
    assert statuses(router) == {"broken": "failed", "smollm2": "unloaded", "twin": "loaded"}
    expect(page.locator("article.message.assistant")).to_have_count(2)

    # A new conversation starts on the model picked last; back to A there.
    page.get_by_role("button", name="+ New chat").click()
    expect(page).not_to_have_url(re.compile(first))
    expect(page.locator("header h1")).to_have_text("New chat")
    expect(picker).to_have_value("twin")
    start_chat(chat)
    picker.select_option("smollm2")
    chat.say("Name a colour.")
    assert turns.asked[2] == "smollm2" and turns.answered[2] == {"smollm2"}
    assert statuses(router) == {"broken": "failed", "smollm2": "loaded", "twin": "unloaded"}
    shot("router-back-to-first-model")

    # Each conversation kept its own model: the first one is on B, and a turn there loads B.
    page.locator(f'.session[data-id="{first}"] .open').click()
    expect(page).to_have_url(re.compile(first))
    expect(picker).to_have_value("twin")
    expect(page.locator(f'.session[data-id="{first}"] .model')).to_have_text("twin")
    reply = chat.say("And of Spain?")
    expect(reply.locator(".markdown")).not_to_be_empty()
    assert turns.asked[3] == "twin" and turns.answered[3] == {"twin"}
    assert statuses(router)["twin"] == "loaded"
    page.reload()  # kept in this browser
    expect(picker).to_have_value("twin")
    expect(chat.replies).to_have_count(3)


def test_a_model_that_fails_shows_why_and_another_one_answers(
    page: Page, router: ServerProcess, shot
):
    page.set_viewport_size({"width": 1280, "height": 800})
    chat = ChatPage(page, router.base_url)
    chat.open()
    expect(page).to_have_url(SESSION_ID, timeout=TIMEOUT_MS)
    opened = page.url
    page.get_by_role("button", name="+ New chat").click()
    expect(page).not_to_have_url(opened)
    expect(page.locator("header h1")).to_have_text("New chat")
    start_chat(chat)
    picker = page.get_by_role("combobox", name="Model", exact=True)
    picker.select_option("broken")
    banner = page.locator(".model-banner.failed")
    expect(banner).to_contain_text("Model broken failed to load:")
    expect(banner.locator(".reason")).to_contain_text("exited with status")
    shot("router-model-failed")
    chat.type_and_send("Hello?")
    expect(chat.error).to_contain_text("failed to load", timeout=TIMEOUT_MS)
    expect(chat.box).to_have_value("Hello?")  # refused: nothing stored, the text kept
    picker.select_option("twin")
    expect(banner).to_have_count(0)
    chat.box.press("Enter")
    expect(chat.replies).to_have_count(1, timeout=TIMEOUT_MS)
    assert statuses(router)["twin"] == "loaded"
