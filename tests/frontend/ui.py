"""The chat page as the tests drive it: what a user clicks and reads, found by role and label."""

from __future__ import annotations

import httpx
from playwright.sync_api import Locator, Page, expect

TIMEOUT_MS = 120_000  # a reply on 2 shared cores; expect() returns as soon as the state is there


class ChatPage:
    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url

    # --- set-up through the API (fast, deterministic sampling) ---------------------------------

    def create_session(self, title: str = "test", **sampling) -> str:
        body = {
            "title": title,
            "system_prompt": "You are terse.",
            "sampling": {"temperature": 0, "max_tokens": 12, **sampling},
        }
        r = httpx.post(f"{self.base_url}/v1/sessions", json=body, timeout=30)
        r.raise_for_status()
        return r.json()["id"]

    def open(self, session_id: str | None = None) -> ChatPage:
        self.page.goto(f"{self.base_url}/" + (f"#/s/{session_id}" if session_id else ""))
        if session_id:
            expect(self.page.locator(".session.active")).to_be_visible()
        return self

    def stored(self, session_id: str) -> list[dict]:
        r = httpx.get(f"{self.base_url}/v1/sessions/{session_id}", timeout=30)
        return r.json()["messages"]

    # --- what a user sees and does -------------------------------------------------------------

    @property
    def box(self) -> Locator:
        return self.page.get_by_role("textbox", name="Message", exact=True)

    @property
    def send_button(self) -> Locator:
        return self.page.get_by_role("button", name="Send", exact=True)

    @property
    def stop_button(self) -> Locator:
        return self.page.get_by_role("button", name="Stop", exact=True)

    @property
    def replies(self) -> Locator:
        return self.page.locator("article.message.assistant:not(.streaming)")

    @property
    def cache_bars(self) -> Locator:
        return self.page.locator(".cachebar")

    def type_and_send(self, text: str) -> None:
        expect(self.send_button).to_be_enabled(timeout=TIMEOUT_MS)
        self.box.fill(text)
        self.box.press("Enter")

    def say(self, text: str) -> Locator:
        """Send a message and wait for its stored reply; returns the reply's article."""
        n = self.replies.count()
        self.type_and_send(text)
        expect(self.replies).to_have_count(n + 1, timeout=TIMEOUT_MS)
        expect(self.send_button).to_be_enabled(timeout=TIMEOUT_MS)
        return self.replies.nth(n)

    @property
    def error(self) -> Locator:
        return self.page.locator(".notice.error")
