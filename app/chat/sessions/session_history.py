"""A stored session as the prompt of its next turn.

Which stored messages go into the prompt, and how: text-only sessions get token-exact prompts
(app/chat/sessions/conversation.py: each reply's generated ids spliced in); a session with images is
tokenized through the projector, its images read back from the media store by id.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from app.chat.images import image_prompt
from app.chat.messages import ChatMessage, FunctionCall, MessageToolCall
from app.chat.sessions.conversation import conversation_prompt
from app.chat.templates.prompter import Prompter
from app.chat.tools import ToolSpec, calls_text, tool_results_text, with_tools_system
from app.db.records import MessageRecord, SessionRecord
from app.engine.request import RequestError, no_projector
from app.engine.tokenizer import ImageTokenizer
from app.media.media_store import MediaStore, image_limits
from mm.image import ImageError, image_bytes_from_url
from mm.mtmd_bridge import ImageChunk
from mm.token_sequence import TokenSequence


@dataclass(slots=True)
class History:
    messages: list[ChatMessage]  # system, the kept turns, the new message (content as stored)
    replies: dict[int, list[int]]  # message index -> the reply's generated ids

    @property
    def has_images(self) -> bool:
        return any(m.has_images() for m in self.messages)


def history(session: SessionRecord, content: str | list[dict[str, Any]]) -> History:
    """The messages of the next prompt: the stored ones, then a new user message."""
    return turn_history(session, [ChatMessage(role="user", content=content)], [])


def _message(m: MessageRecord) -> ChatMessage:
    calls = [
        MessageToolCall(
            id=c.get("id"), function=FunctionCall(name=c["name"], arguments=c["arguments"])
        )
        for c in m.tool_calls or []
    ]
    return ChatMessage(
        role=m.role, content=m.content, tool_calls=calls or None, reasoning_content=m.reasoning
    )


def turn_history(session: SessionRecord, new: list[ChatMessage], tools: list[ToolSpec]) -> History:
    """The messages of the next prompt: the stored ones, then `new` (user messages, tool
    results), with tool calls and results in app/chat/tools.py's generic format and the tools
    in the system message.

    A turn without a usable reply (it failed, was cancelled before any text, or the server died
    during it) is left out with its user message: two user messages in a row would break
    templates that insist on alternating roles. A cancelled reply stays with the text the user
    saw. Tool results wait with the user message for the reply that follows them."""
    messages: list[ChatMessage] = []
    replies: dict[int, list[int]] = {}
    system = with_tools_system(session.system_prompt, tools) if tools else session.system_prompt
    if system:
        messages.append(ChatMessage(role="system", content=system))
    pending: list[ChatMessage] = []  # a user message and tool results waiting for a reply
    results: list[str] = []

    def flush() -> None:
        if results:
            pending.append(ChatMessage(role="user", content=tool_results_text(results)))
            results.clear()

    stored = [(_message(m), m) for m in session.messages]
    for message, record in [*stored, *((m, None) for m in new)]:
        if message.role == "user":
            results.clear()
            pending[:] = [message]
        elif message.role == "tool":
            results.append(message.text())
        elif message.role == "assistant":
            flush()
            text = message.text()
            calls = [
                (c.function.name, c.function.arguments_text()) for c in message.tool_calls or []
            ]
            failed = record is not None and record.status == "error"
            if not failed and (text or calls) and pending:
                messages.extend(pending)
                if record is not None and record.token_ids is not None:
                    replies[len(messages)] = record.token_ids
                reasoning = message.reasoning_content
                reply = ChatMessage(
                    role="assistant", content=text + calls_text(calls), reasoning_content=reasoning
                )
                messages.append(reply)
                pending.clear()
    flush()
    messages.extend(pending)
    return History(messages, replies)


async def history_prompt(
    h: History,
    prompter: Prompter,
    vision: ImageTokenizer | None,
    settings: Any,
    media: MediaStore | None,
) -> tuple[TokenSequence, dict[str, ImageChunk]]:
    """Runs in a worker thread: the template is rendered once per stored reply, images decoded."""
    if not h.has_images:
        template = [m.for_template() for m in h.messages]
        prompt = await asyncio.to_thread(conversation_prompt, prompter, template, h.replies)
        return prompt, {}
    if vision is None:
        raise no_projector("content")
    return await asyncio.to_thread(
        image_prompt, prompter, vision, h.messages, settings, media, None, None, "content"
    )


def visible_uploads(content: list[dict[str, Any]], media: MediaStore, tenant_id: str) -> None:
    """RequestError unless every uploaded image the message names is one the tenant may use
    (another tenant's id reads as unknown). Worker thread."""
    for part in content:
        if part.get("type") == "image_file":
            file_id = part["image_file"]["file_id"]
            try:
                media.get(file_id, tenant_id)
            except KeyError:
                raise RequestError(
                    f"no uploaded media with id {file_id!r}", param="content"
                ) from None


def store_images(content: list[dict[str, Any]], media: MediaStore, settings: Any) -> list[dict]:
    """The message's parts with inline images saved to the media store and replaced by their
    ids (`image_file` parts), so the stored history holds each image once and by reference.
    Worker thread."""
    limits = image_limits(settings)
    out = []
    for part in content:
        if part.get("type") == "image_url":
            try:
                data = image_bytes_from_url(part["image_url"]["url"], limits)
                record = media.save(data, limits)
            except ImageError as e:
                raise RequestError(str(e), param="content") from e
            part = {"type": "image_file", "image_file": {"file_id": record.id}}
        out.append(part)
    return out
