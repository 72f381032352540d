"""How stored messages become the template's messages (unit level)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.db.records import MessageRecord, SessionRecord
from app.routes.sessions import _history

NOW = datetime.now(UTC)


def msg(seq: int, role: str, content, status: str = "complete", ids=None) -> MessageRecord:
    return MessageRecord(
        seq, "s", seq, role, content, ids, None, None, None, None, None, status, None, NOW
    )


def session(*messages: MessageRecord, system: str | None = "Be brief.") -> SessionRecord:
    return SessionRecord("s", None, system, {}, NOW, NOW, len(messages), list(messages))


def test_turns_without_a_usable_reply_are_left_out_with_their_question():
    s = session(
        msg(0, "user", "one"),
        msg(1, "assistant", "1", ids=[7]),
        msg(2, "user", "lost to a crash"),  # no reply at all
        msg(3, "user", "timed out"),
        msg(4, "assistant", "par", status="error"),
        msg(5, "user", "cancelled early"),
        msg(6, "assistant", "", status="cancelled"),
        msg(7, "user", "cancelled later"),
        msg(8, "assistant", "half a rep", status="cancelled", ids=[8, 9]),
    )
    messages, replies = _history(s, "new")
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "Be brief."),
        ("user", "one"),
        ("assistant", "1"),
        ("user", "cancelled later"),
        ("assistant", "half a rep"),
        ("user", "new"),
    ]
    assert replies == {2: [7], 4: [8, 9]}


def test_content_parts_give_their_text_and_no_system_prompt_is_fine():
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    stored = session(msg(0, "user", parts), msg(1, "assistant", "ok"), system=None)
    messages, replies = _history(stored, "c")
    assert messages == [
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "c"},
    ]
    assert replies == {}
