"""Fast UI-only tests: the built page from a plain static file server, the API faked with
Playwright's page.route. They cover what the real model cannot be made to produce on demand
(Markdown with code and math, citations, an error in the middle of a stream) and the documents
panel against the documents API's shapes."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, Route, expect

SID = "a" * 32
CITATION = {
    "index": 1,
    "chunk_id": "chunk-1",
    "document_id": "doc-1",
    "filename": "handbook.pdf",
    "page": 3,
    "char_start": 0,
    "char_end": 40,
    "score": 0.82,
    "text": "Paris has been the capital of France since 987.",
}
REPLY = (
    "Paris is the capital [1].\n\n```python\nprint('hi')\n```\n\nEuler: $e^{i\\pi}+1=0$\n\n"
    "<img src=x onerror=alert(1)>"
)
TIMINGS = {
    "id_slot": 0,
    "cache_n": 30,
    "cache_sources": {"own_slot": 0, "other_slot": 0, "host": 30, "disk": 0},
    "prompt_n": 10,
    "prompt_ms": 50.0,
    "prompt_per_second": 200.0,
    "predicted_n": 20,
    "predicted_ms": 400.0,
    "predicted_per_second": 50.0,
}
USAGE = {
    "prompt_tokens": 40,
    "completion_tokens": 20,
    "prompt_tokens_details": {"cached_tokens": 30},
}


class FakeApi:
    """Sessions, messages and documents in memory, answering as the real API does."""

    def __init__(
        self, stream_error: str | None = None, key: str | None = None, timings: dict = TIMINGS
    ) -> None:
        self.key = key
        self.timings = timings
        self.messages: list[dict] = []
        self.sent: list[dict] = []
        self.patches: list[dict] = []
        self.stream_error = stream_error
        self.collections = [{"id": "col-1", "object": "collection", "name": "notes"}]
        self.documents: list[dict] = []
        self.polls = 0
        self.session_ids: list[str | None] = []  # X-Session-Id of each /v1/sessions/{id} call

    def session(self) -> dict:
        return {
            "id": SID,
            "object": "session",
            "title": "fake",
            "system_prompt": None,
            "sampling": {"max_tokens": 64},
            "n_messages": len(self.messages),
            "messages": self.messages,
        }

    def handle(self, route: Route) -> None:
        req = route.request
        path = re.sub(r"^https?://[^/]+/", "", req.url).split("?")[0]
        if self.key and req.headers.get("authorization") != f"Bearer {self.key}":
            message = "this server needs an API key: send Authorization: Bearer KEY"
            return self.json(route, {"error": {"message": message, "code": "no_key"}}, 401)
        key = (req.method, path)
        if path.startswith("v1/sessions/"):
            self.session_ids.append(req.headers.get("x-session-id"))
        if key == ("GET", "v1/sessions"):
            return self.json(route, {"object": "list", "data": [self.session()]})
        if key == ("GET", f"v1/sessions/{SID}"):
            return self.json(route, self.session())
        if key == ("PATCH", f"v1/sessions/{SID}"):
            self.patches.append(json.loads(req.post_data or "{}"))
            return self.json(route, self.session())
        if key == ("POST", f"v1/sessions/{SID}/messages"):
            return self.reply(route, json.loads(req.post_data or "{}"))
        if key == ("GET", "v1/collections"):
            return self.json(route, {"object": "list", "data": self.collections})
        if key == ("GET", "v1/collections/col-1/documents"):
            self.polls += 1
            for d in self.documents:  # ingestion moves on with every poll
                if d["status"] == "queued":
                    d["status"] = "processing"
                elif d["status"] == "processing" and self.polls > 3:
                    d.update(status="ready", progress={"chunks_done": 3, "chunks_total": 3})
                    d["n_chunks"] = 3
            return self.json(route, {"object": "list", "data": self.documents})
        if key == ("POST", "v1/collections/col-1/documents"):
            doc = {
                "id": "doc-1",
                "object": "document",
                "filename": "handbook.pdf",
                "status": "queued",
                "progress": {"chunks_done": 1, "chunks_total": 3},
                "error": None,
                "duplicate": False,
                "n_chunks": None,
            }
            self.documents.append(doc)
            return self.json(route, doc, 202)
        if key == ("DELETE", "v1/documents/doc-1"):
            self.documents.clear()
            return self.json(route, {"id": "doc-1", "object": "document.deleted", "deleted": True})
        return self.json(route, {"error": {"message": f"unfaked {key}"}}, 404)

    def json(self, route: Route, body: dict, status: int = 200) -> None:
        route.fulfill(status=status, content_type="application/json", body=json.dumps(body))

    def reply(self, route: Route, body: dict) -> None:
        self.sent.append(body)
        self.messages.append(
            {
                "id": len(self.messages) + 1,
                "seq": len(self.messages),
                "role": "user",
                "content": body["content"],
                "status": "complete",
            }
        )
        chunk = {"id": "c", "object": "chat.completion.chunk", "session_id": SID}
        events = [{**chunk, "citations": [CITATION], "choices": []}]
        events += [
            {**chunk, "choices": [{"index": 0, "delta": {"content": REPLY[i : i + 12]}}]}
            for i in range(0, len(REPLY), 12)
        ]
        if self.stream_error:
            events.append({"error": {"message": self.stream_error, "type": "server_error"}})
        else:
            done = {"index": 0, "delta": {}, "finish_reason": "stop"}
            events += [
                {**chunk, "choices": [done], "timings": self.timings},
                {**chunk, "choices": [], "usage": USAGE},
            ]
            self.messages.append(
                {
                    "id": len(self.messages) + 1,
                    "seq": len(self.messages),
                    "role": "assistant",
                    "content": REPLY,
                    "status": "complete",
                    "usage": USAGE,
                    "timings": self.timings,
                    "citations": [CITATION],
                }
            )
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        route.fulfill(status=200, content_type="text/event-stream", body=sse)


def open_fake(page: Page, url: str, api: FakeApi) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.route(re.compile(r".*/(v1/|slots|cache).*"), api.handle)
    page.goto(f"{url}/#/s/{SID}")
    expect(page.locator("header h1")).to_have_text("fake")


def send(page: Page, text: str) -> None:
    box = page.get_by_role("textbox", name="Message", exact=True)
    box.fill(text)
    box.press("Enter")


def test_markdown_code_math_citations_and_the_cache_bar(page: Page, static_url: str, shot):
    api = FakeApi()
    open_fake(page, static_url, api)
    send(page, "What is the capital?")
    reply = page.locator("article.message.assistant").last
    expect(reply.locator("pre code.hljs")).to_contain_text("print")
    expect(reply.locator(".katex")).to_have_count(1)
    expect(reply.locator("img[onerror]")).to_have_count(0)  # DOMPurify dropped the handler
    bar = reply.locator(".cachebar")
    expect(bar).to_have_attribute("data-cached", "30")
    expect(bar).to_have_attribute("data-source", "host")
    expect(bar).to_contain_text("30 cached (host memory), 10 fresh")
    expect(bar).to_contain_text("TTFT 50 ms")
    expect(bar).to_contain_text("50.0 tok/s")
    expect(bar.locator(".saved")).to_contain_text("150 ms")  # 30 tokens at 200 tokens/s
    chip = reply.get_by_role("button", name=re.compile(r"\[1\] handbook.pdf p. 3"))
    chip.click()
    passage = reply.get_by_role("dialog", name="Source 1")
    expect(passage).to_contain_text("Paris has been the capital of France since 987.")
    expect(passage).to_contain_text("page 3")
    expect(passage).to_contain_text("relevance 0.82")
    shot("fake-citation-open")
    expect(passage).to_be_focused()
    page.keyboard.press("Escape")  # keyboard: Escape closes it
    expect(passage).to_have_count(0)


def test_an_error_in_the_middle_of_a_stream_shows_as_an_error(page: Page, static_url: str):
    api = FakeApi(stream_error="the request took longer than --timeout")
    open_fake(page, static_url, api)
    send(page, "Hello")
    error = page.locator(".notice.error")
    expect(error).to_contain_text("the request took longer than --timeout")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_enabled()


def test_documents_panel_uploads_shows_progress_and_answers_from_a_collection(
    page: Page, static_url: str, shot, tmp_path
):
    api = FakeApi()
    open_fake(page, static_url, api)
    page.get_by_role("button", name="Documents", exact=True).click()
    panel = page.get_by_role("region", name="Documents", exact=True)
    expect(panel).to_contain_text("notes")
    doc = tmp_path / "handbook.pdf"
    doc.write_bytes(b"%PDF-1.4 fake")
    panel.locator("input[type=file]").set_input_files(str(doc))
    row = panel.locator("li.document[data-status]")
    expect(row).to_have_attribute("data-status", "processing")
    expect(row).to_have_attribute("data-status", "ready")
    expect(row).to_contain_text("3 chunks")
    panel.get_by_label("Answer from notes").check()
    shot("fake-documents-panel")
    send(page, "What is the capital?")
    expect(page.locator("article.message.assistant .chip")).to_have_count(1)
    assert api.sent[-1]["rag"] == {"collection_ids": ["col-1"]}
    page.once("dialog", lambda d: d.accept())
    panel.get_by_role("button", name="Delete handbook.pdf").click()
    expect(row).to_have_count(0)


def test_blend_is_asked_for_and_its_fallback_shows_in_the_cache_bar(page: Page, static_url: str):
    reason = "the model's memory cannot shift"
    api = FakeApi(timings={**TIMINGS, "kv_reuse": "prefix", "kv_reuse_reason": reason})
    open_fake(page, static_url, api)
    page.get_by_role("button", name="Documents", exact=True).click()
    panel = page.get_by_role("region", name="Documents", exact=True)
    panel.get_by_label("Answer from notes").check()
    panel.get_by_label("Reuse of the sources' cache").select_option("blend")
    send(page, "What is the capital?")
    bar = page.locator("article.message.assistant .cachebar")
    expect(bar).to_have_attribute("data-kv-reuse", "prefix")
    expect(bar.locator(".reuse")).to_have_text(f"prefix reuse (blend fell back: {reason})")
    expect(bar).to_have_attribute("data-blended", "0")
    assert api.sent[-1]["rag"] == {"collection_ids": ["col-1"], "kv_reuse": "blend"}


def test_session_calls_name_their_session_in_a_header(page: Page, static_url: str):
    """nginx keys a session's replica on X-Session-Id where the path does not show the id
    (deploy/nginx.conf): the UI sends it with every call about a session."""
    api = FakeApi()
    open_fake(page, static_url, api)
    send(page, "Hello?")
    expect(page.locator("article.message.assistant")).to_have_count(1)
    assert len(api.session_ids) >= 2  # the session read and the turn, at least
    assert set(api.session_ids) == {SID}


def test_shift_enter_is_a_new_line_and_enter_sends(page: Page, static_url: str):
    api = FakeApi()
    open_fake(page, static_url, api)
    box = page.get_by_role("textbox", name="Message", exact=True)
    box.fill("first line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    expect(box).to_have_value("first line\nsecond line")
    assert api.sent == []
    box.press("Enter")
    expect(page.locator("article.message.user")).to_contain_text("second line")
    expect(box).to_have_value("")
    expect(page.locator(".cachebar")).to_have_count(1)  # the reply came back
    assert api.sent[0]["content"] == "first line\nsecond line"


def test_a_preset_fills_the_settings_and_saving_sends_them(page: Page, static_url: str):
    api = FakeApi()
    open_fake(page, static_url, api)
    page.get_by_role("button", name="Settings", exact=True).click()
    page.get_by_label("Preset").select_option("Precise")
    expect(page.get_by_label("Max tokens")).to_have_value("256")
    expect(page.get_by_label("System prompt")).to_have_value(re.compile("precise assistant"))
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".notice")).to_contain_text("Settings saved")
    assert api.patches[-1]["sampling"] == {"max_tokens": 256, "temperature": 0.2}
    assert api.patches[-1]["system_prompt"].startswith("You are a precise assistant")


def test_a_server_with_api_keys_asks_for_one_and_it_is_sent(page: Page, static_url: str):
    api = FakeApi(key="sk-test")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.route(re.compile(r".*/(v1/|slots|cache).*"), api.handle)
    page.goto(f"{static_url}/#/s/{SID}")
    form = page.locator("form.keyform")
    expect(form).to_contain_text("needs an API key")
    form.get_by_label("API key").fill("sk-test")
    form.get_by_role("button", name="Use key").click()
    expect(page.locator("header h1")).to_have_text("fake")
    expect(form).to_have_count(0)
    send(page, "Hello")
    expect(page.locator(".cachebar")).to_have_count(1)
    assert api.sent  # accepted: it carried the key
    page.reload()  # the key is kept in this browser
    expect(page.locator("article.message.assistant")).to_have_count(1)


def test_a_tool_call_and_its_result_read_plainly(page: Page, static_url: str, shot):
    """A session holding a tool loop (the Responses API stores them) shows the call's
    tool and arguments, and the result with the call it answers."""
    api = FakeApi()
    call = {"id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'}
    done = {"status": "complete"}
    api.messages = [
        {"id": 1, "seq": 0, "role": "user", "content": "Weather in Paris?", **done},
        {"id": 2, "seq": 1, "role": "assistant", "content": "", "tool_calls": [call], **done},
        {"id": 3, "seq": 2, "role": "tool", "content": "sunny", "tool_call_id": "call_1", **done},
        {"id": 4, "seq": 3, "role": "assistant", "content": "It is sunny.", **done},
    ]
    open_fake(page, static_url, api)
    shown = page.locator("article.message.assistant .toolcall")
    expect(shown).to_have_count(1)
    expect(shown.locator(".toolname")).to_have_text("Calls get_weather")
    expect(shown.locator(".toolargs")).to_have_text('{\n  "city": "Paris"\n}')
    result = page.get_by_role("article", name="Tool result")
    expect(result).to_contain_text("sunny")
    expect(result.locator(".toolfor")).to_have_text("Result of call_1")
    shot("fake-tool-call")
