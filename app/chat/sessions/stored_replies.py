"""A session's replies as stored: the end hook that stores a session turn's reply when the turn
ends, whatever its status (complete, cancelled or error, also when the client went away or the
server stopped), its reasoning apart (a Responses turn's: its tool calls); the fields every
stored reply records; and, for regenerate, the last question taken off a loaded session with
the reply that followed it, and its user's own words.

A stored reply keeps its generated token ids only where they are exactly what its text
tokenizes to: the next turn's prompt splices them in (app/chat/sessions/conversation.py) in place
of the text, so ids of other text would make the prompt say what the stored reply does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.chat.templates.prompter import Prompter
from app.chat.templates.reasoning import Thinking, split_reasoning
from app.chat.tools import ReplyParser
from app.chat.turn import TurnResult
from app.chat.turn_sources import Citation, citations_json
from app.db.records import MessageRecord, SessionRecord
from app.db.store import Store
from app.engine.request import RequestError


def rewind(session: SessionRecord) -> MessageRecord:
    """For regenerate: the last user message, with it and what follows taken off `session`
    (they are replaced in the same transaction as the message is stored again)."""
    last = next((m for m in reversed(session.messages) if m.role == "user"), None)
    if last is None:
        raise RequestError("the session has no user message to answer", param="session_id")
    session.messages = [m for m in session.messages if m.seq < last.seq]
    return last


def own_words(m: MessageRecord) -> str | list[dict[str, Any]]:
    """A user message's content less the sources part a `rag` turn put before the user's words
    (marked with its `citations`: app/docs/questions/chat_sources.py); a lone text part left is
    its text."""
    if not isinstance(m.content, list):
        return m.content
    own = [p for p in m.content if not (isinstance(p, dict) and p.get("citations"))]
    if len(own) == 1 and own[0].get("type") == "text":
        return own[0]["text"]
    return own


def reply_store(
    store: Store,
    prompter: Prompter,
    session_id: str,
    prompt_tokens: int,
    thinking: Thinking,
    cite: Callable[[str], list[Citation]] | None = None,
) -> Callable[[TurnResult], None]:
    """The end hook that stores a session message's reply, its reasoning split off as
    `thinking` says; `cite`: a full-mode turn's citations, found from the reply's text and
    stored with it (a retrieval turn's are its user message's)."""

    def store_reply(result: TurnResult) -> None:
        fields = reply_fields(result, prompter, prompt_tokens)
        reasoning, content = split_reasoning(result.text, thinking)
        if cite is not None:
            fields["citations"] = citations_json(cite(result.text))
        store.add_message(session_id, "assistant", content, reasoning=reasoning, **fields)

    return store_reply


def calls_reply_store(
    store: Store, prompter: Prompter, session_id: str, prompt_tokens: int, parser: ReplyParser
) -> Callable[[TurnResult], None]:
    """The end hook that stores a Responses turn's reply: its text and its tool calls."""

    def store_reply(result: TurnResult) -> None:
        content, calls = parser.parse(result.text)
        store.add_message(
            session_id,
            "assistant",
            content,
            **reply_fields(result, prompter, prompt_tokens),
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]
            or None,
        )

    return store_reply


def reply_fields(result: TurnResult, prompter: Prompter, prompt_tokens: int) -> dict[str, Any]:
    """What a stored reply records besides its text: how it ended, its counts and timings, and
    its token ids where they are exactly what its text tokenizes to (the next turn reuses them)."""
    done, failed = result.finished, result.failed
    exact = result.status != "error" and prompter.matches(result.tokens, result.text)
    return {
        "status": result.status,
        "token_ids": result.tokens if exact else None,
        "prompt_tokens": prompt_tokens,
        "cached_tokens": done.cached_tokens if done else None,
        "completion_tokens": done.completion_tokens if done else len(result.tokens),
        "timings": done.timings.as_dict() if done else None,
        "finish_reason": done.finish_reason if done else None,
        "error": failed.message if failed else None,
    }
