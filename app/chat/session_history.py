"""A stored session as the prompt of its next turn.

Which stored messages go into the prompt, and how: text-only sessions get token-exact prompts
(app/chat/conversation.py: each reply's generated ids spliced in); a session with images is
tokenized through the projector, its images read back from the media store by id.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from app.chat.conversation import conversation_prompt
from app.chat.images import image_prompt
from app.chat.messages import ChatMessage
from app.chat.prompter import Prompter
from app.db.records import SessionRecord
from app.engine.request import RequestError, no_projector
from app.engine.vision import Vision
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
    """The messages of the next prompt.

    A turn without a usable reply (it failed, was cancelled before any text, or the server died
    during it) is left out with its user message: two user messages in a row would break
    templates that insist on alternating roles. A cancelled reply stays with the text the user
    saw."""
    messages: list[ChatMessage] = []
    replies: dict[int, list[int]] = {}
    if session.system_prompt:
        messages.append(ChatMessage(role="system", content=session.system_prompt))
    pending: ChatMessage | None = None  # a user message waiting for its reply
    for m in session.messages:
        if m.role == "user":
            pending = ChatMessage(role="user", content=m.content)
            continue
        reply = ChatMessage(role="assistant", content=m.content)
        if m.role == "assistant" and m.status != "error" and reply.text() and pending:
            messages.append(pending)
            if m.token_ids is not None:
                replies[len(messages)] = m.token_ids
            messages.append(ChatMessage(role="assistant", content=reply.text()))
            pending = None
    messages.append(ChatMessage(role="user", content=content))
    return History(messages, replies)


async def history_prompt(
    h: History,
    prompter: Prompter,
    vision: Vision | None,
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
    return await asyncio.to_thread(image_prompt, prompter, vision, h.messages, settings, media)


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
