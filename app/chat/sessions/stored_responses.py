"""Responses (the Responses API's) as turns of a stored session: a response is named by the
last message of its input; its reply is the assistant message that follows, and the response
before it is the one whose reply precedes its input. Plain functions of a loaded session.

A response's id names its session and the last message of its input, so
`previous_response_id` finds the conversation (and its slot) without a table of its own."""

from __future__ import annotations

from dataclasses import dataclass

from app.db.records import MessageRecord, SessionRecord

PREFIX = "resp_"


def response_id(session_id: str, message_id: int) -> str:
    return f"{PREFIX}{session_id}_{message_id}"


def parse_response_id(rid: str) -> tuple[str, int] | None:
    """(session id, id of the response's last input message), or None for an id that is not
    one of a stored response."""
    if not rid.startswith(PREFIX):
        return None
    session, _, message = rid[len(PREFIX) :].rpartition("_")
    if not session or not message.isdigit() or len(message) > 18:
        return None
    return session, int(message)


@dataclass(slots=True)
class StoredResponse:
    inputs: list[MessageRecord]  # the messages of its input, in order
    reply: MessageRecord | None  # None while it is being generated
    previous: int | None  # the message id that names the response before it

    @property
    def key(self) -> int:
        return self.inputs[-1].id


def find_response(session: SessionRecord, message_id: int) -> StoredResponse | None:
    """The response named by `message_id` (its last input message), if it is one."""
    messages = session.messages
    at = next((i for i, m in enumerate(messages) if m.id == message_id), None)
    if at is None or messages[at].role == "assistant":
        return None
    after = messages[at + 1] if at + 1 < len(messages) else None
    reply = after if after is not None and after.role == "assistant" else None
    if reply is None and after is not None:
        return None  # an input message that is not the last of its response's input
    start = at
    while start > 0 and messages[start - 1].role != "assistant":
        start -= 1
    previous = None
    if start >= 2 and messages[start - 2].role != "assistant":
        previous = messages[start - 2].id
    return StoredResponse(messages[start : at + 1], reply, previous)


def is_latest(session: SessionRecord, found: StoredResponse) -> bool:
    """Whether nothing follows the response's reply (a new turn continues the session)."""
    return found.reply is not None and session.messages[-1].id == found.reply.id
