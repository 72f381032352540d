"""The model picker against a faked router (Playwright's page.route): what a real router cannot
be made to show on demand (a model held in `loading` while the test looks, a request that waits
for it, a model that failed with a reason), and what every request names. The real router is
driven in test_router_chat.py."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page, Route, expect

from tests.frontend.test_ui_fakes import SID, FakeApi, open_fake, send

REASON = "the model server exited with status 1: llama_model_load: error loading model"
OTHER = "b" * 32


class FakeRouter(FakeApi):
    """A router over the fake API: GET /props says `role: router`, GET /models lists three
    models, POST /models/load starts a load the test ends (`finish`); every request's model
    (the body's, else the query's) is recorded with its path."""

    def __init__(self, session_model: str | None = None) -> None:
        super().__init__()
        self.status = {"alpha": "loaded", "beta": "unloaded", "broken": "failed"}
        self.named: list[tuple[str, str, str | None]] = []  # (method, path, model)
        self.loads: list[str] = []
        self.created: list[dict] = []
        self.session_model = session_model
        self.held: list[tuple[Route, dict]] = []  # turns waiting for their model

    def session(self) -> dict:
        s = super().session()
        return s if self.session_model is None else {**s, "model": self.session_model}

    def handle(self, route: Route) -> None:
        req = route.request
        url = urlparse(req.url)
        path = url.path.lstrip("/")
        body = json.loads(req.post_data or "{}") if req.method in ("POST", "PATCH") else {}
        query = parse_qs(url.query).get("model", [None])[0]
        if path not in ("props", "models", "models/load", "models/unload"):
            self.named.append((req.method, path, body.get("model") or query))
        if path == "props":
            return self.json(route, {"role": "router", "max_instances": 1, "models_autoload": True})
        if path == "models":
            return self.json(route, {"object": "list", "data": self.listing()})
        if path == "models/load":
            self.loads.append(body["model"])
            self.start_load(body["model"])
            return self.json(route, {"success": True})
        if (req.method, path) == ("POST", "v1/sessions"):
            self.created.append(body)
            return self.json(route, {**self.session(), "id": OTHER, "title": "New chat"}, 201)
        if path.startswith(f"v1/sessions/{OTHER}"):
            return self.json(route, {**self.session(), "id": OTHER, "messages": []})
        if req.method == "PATCH" and "model" in body:
            self.session_model = body["model"]
        model = body.get("model") or query
        if path.endswith("/messages") and self.status.get(model) == "failed":
            message = f"model '{model}' failed to load: {REASON}"
            return self.json(route, {"error": {"message": message, "code": "unavailable"}}, 503)
        if path.endswith("/messages") and self.status.get(model) != "loaded":
            self.start_load(model)
            self.held.append((route, body))  # answered once the test ends the load
            return None
        return super().handle(route)

    def listing(self) -> list[dict]:
        out = []
        for name, value in self.status.items():
            status: dict = {"value": value, "args": ["-m", f"/models/{name}.gguf"]}
            if value == "failed":
                status.update(failed=True, reason=REASON)
            inputs = ["text", "image"] if name == "alpha" else ["text"]
            out.append({"id": name, "status": status, "architecture": {"input_modalities": inputs}})
        return out

    def start_load(self, model: str) -> None:
        for name, value in self.status.items():  # --models-max 1
            if value in ("loaded", "loading"):
                self.status[name] = "unloaded"
        self.status[model] = "loading"

    def finish(self, model: str) -> None:
        """The load of `model` ends; the turns that waited for it are answered."""
        self.status[model] = "loaded"
        held, self.held = self.held, []
        for route, body in held:
            self.reply(route, body)


def open_router(page: Page, url: str, api: FakeRouter) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.route(re.compile(r".*/(v1/|slots|cache|props|models).*"), api.handle)
    page.goto(f"{url}/#/s/{SID}")
    expect(page.locator("header h1")).to_have_text("fake")


def picker(page: Page):
    return page.get_by_role("combobox", name="Model", exact=True)


LOAD = re.compile(r"/models/load$")


def pick_and_load(page: Page, model: str) -> None:
    """Pick a model that is not loaded; returns once the fake router has started its load."""
    with page.expect_response(LOAD):
        picker(page).select_option(model)


def test_the_picker_lists_the_models_with_their_status(page: Page, static_url: str, shot):
    api = FakeRouter()
    open_router(page, static_url, api)
    expect(picker(page)).to_have_value("alpha")  # nothing picked yet: the loaded one
    options = picker(page).locator("option")
    expect(options).to_have_text(["alpha (loaded)", "beta (not loaded)", "broken (failed)"])
    expect(page.locator("header .model-status")).to_have_text("loaded")
    page.get_by_role("button", name="Models", exact=True).click()
    panel = page.get_by_role("region", name="Models", exact=True)
    broken = panel.locator("li[data-model=broken]")
    expect(broken).to_have_attribute("data-status", "failed")
    expect(broken.locator(".reason")).to_have_text(REASON)
    expect(panel.locator("li[data-model=alpha]")).to_contain_text("text, image in")
    shot("fake-models-panel")


def test_picking_a_model_loads_it_shows_the_load_and_the_turn_names_it(
    page: Page, static_url: str, shot
):
    api = FakeRouter()
    open_router(page, static_url, api)
    pick_and_load(page, "beta")
    banner = page.locator(".model-banner.loading")
    expect(banner).to_contain_text("Loading model beta")
    expect(page.locator("header .model-status")).to_have_text("loading…")
    assert api.loads == ["beta"]
    shot("fake-model-loading")
    api.finish("beta")
    expect(banner).to_have_count(0)
    expect(page.locator("header .model-status")).to_have_text("loaded")
    send(page, "Hello")
    expect(page.locator(".cachebar")).to_have_count(1)
    assert api.sent[-1]["model"] == "beta"
    turns = [m for method, path, m in api.named if path.endswith("/messages")]
    assert turns == ["beta"]
    # Every other request named a model too (the loaded one: reading loads none).
    assert all(m for _, _, m in api.named), api.named
    # Remembered in this browser: the page again shows beta for this conversation.
    page.reload()
    expect(picker(page)).to_have_value("beta")


def test_a_turn_that_waits_for_its_model_shows_the_load(page: Page, static_url: str, shot):
    api = FakeRouter(session_model="beta")  # the server stores the session's model
    open_router(page, static_url, api)
    expect(picker(page)).to_have_value("beta")
    expect(page.locator("header .model-status")).to_have_text("not loaded")
    send(page, "Hello")
    live = page.locator("article.message.assistant.streaming .loading-model")
    expect(live).to_have_text("Loading model beta…")
    expect(page.get_by_role("status").filter(has_text="Loading model beta")).to_have_count(1)
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_disabled()
    shot("fake-turn-waits-for-model")
    api.finish("beta")
    expect(page.locator(".cachebar")).to_have_count(1)
    expect(page.locator(".model-banner")).to_have_count(0)
    assert api.sent[-1]["model"] == "beta"
    with page.expect_request(lambda r: r.method == "PATCH") as patch:
        pick_and_load(page, "alpha")
        expect(page.locator("header .model-status")).to_have_text("loading…")
        api.finish("alpha")
        expect(page.locator("header .model-status")).to_have_text("loaded")
    # The server stores the session's model: it is told of the pick.
    assert json.loads(patch.value.post_data or "{}") == {"model": "alpha"}
    page.reload()
    expect(picker(page)).to_have_value("alpha")


def test_a_failed_model_shows_why_and_the_ui_stays_usable(page: Page, static_url: str, shot):
    api = FakeRouter()
    open_router(page, static_url, api)
    picker(page).select_option("broken")
    banner = page.locator(".model-banner[role=alert]")
    expect(banner).to_contain_text(f"Model broken failed to load: {REASON}")
    expect(page.locator("header .model-status")).to_have_text("failed")
    assert api.loads == []  # a failed model is tried again only when asked
    shot("fake-model-failed")
    send(page, "Hello")
    expect(page.locator(".notice.error")).to_contain_text("failed to load")
    box = page.get_by_role("textbox", name="Message", exact=True)
    expect(box).to_have_value("Hello")  # refused: the message stays, to send elsewhere
    with page.expect_response(LOAD):
        banner.get_by_role("button", name="Try again").click()
    expect(page.locator("header .model-status")).to_have_text("loading…")
    assert api.loads == ["broken"]
    api.status["broken"] = "failed"  # and it fails again
    expect(banner).to_be_visible()
    pick_and_load(page, "alpha")  # unloaded by the try: loaded again
    expect(page.locator(".model-banner.loading")).to_contain_text("Loading model alpha")
    api.finish("alpha")
    expect(page.locator(".model-banner")).to_have_count(0)
    box.press("Enter")
    expect(page.locator(".cachebar")).to_have_count(1)
    assert api.sent[-1]["model"] == "alpha"


def test_a_new_conversation_starts_on_the_model_picked_last(page: Page, static_url: str):
    api = FakeRouter()
    open_router(page, static_url, api)
    pick_and_load(page, "beta")
    api.finish("beta")
    page.get_by_role("button", name="+ New chat").click()
    expect(page).to_have_url(re.compile(f"#/s/{OTHER}$"))
    assert api.created[-1]["model"] == "beta"
    expect(picker(page)).to_have_value("beta")


def test_a_single_model_server_shows_no_picker_and_names_no_model(page: Page, static_url: str):
    api = FakeApi()
    open_fake(page, static_url, api)  # GET /props is not a router's (the static server's 404)
    send(page, "Hello")
    expect(page.locator(".cachebar")).to_have_count(1)
    expect(page.get_by_role("combobox", name="Model")).to_have_count(0)
    expect(page.get_by_role("button", name="Models", exact=True)).to_have_count(0)
    assert "model" not in api.sent[-1]
