"""A reply's thought in the web chat: folded above the answer, streamed and stored.
The packaged model does not think on its own: the session's grammar makes it write a thought."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, Route, expect

from bench.lib.server_process import ServerProcess
from tests.frontend.ui import ChatPage

GRAMMAR = 'root ::= "<think>\\nI think" [a-z ]{1,12} "\\n</think>\\n\\nAnswer:" [a-z ]{1,12}'


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "2048") as srv:
        yield srv


def _with_grammar(route: Route) -> None:
    body = json.loads(route.request.post_data or "{}")
    route.continue_(post_data=json.dumps({**body, "grammar": GRAMMAR}))


def test_a_thought_is_folded_above_the_answer(page: Page, server: ServerProcess, shot) -> None:
    chat = ChatPage(page, server.base_url)
    sid = chat.create_session("thinking", max_tokens=40, reasoning_format="deepseek")
    page.route("**/v1/sessions/*/messages", _with_grammar)  # the UI sends no grammar
    chat.open(sid)
    reply = chat.say("What is two plus two?")
    thought = reply.locator("details.thought")
    expect(thought.locator("summary")).to_have_text("Thought")
    expect(reply.locator(".markdown")).to_contain_text("Answer:")
    expect(reply.locator(".markdown")).not_to_contain_text("I think")
    stored = chat.stored(sid)[-1]
    thought.locator("summary").click()
    expect(thought.locator(".plain")).to_have_text(stored["reasoning_content"])
    shot("reasoning-thought-opened")
