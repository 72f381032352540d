"""How stored messages become the template's messages (unit level)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.chat.sessions.session_history import history
from app.db.records import MessageRecord, SessionRecord

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
    h = history(s, "new")
    messages, replies = [m.for_template() for m in h.messages], h.replies
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
    h = history(stored, "c")
    messages, replies = [m.for_template() for m in h.messages], h.replies
    assert not h.has_images
    assert messages == [
        {"role": "user", "content": "ab"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "c"},
    ]
    assert replies == {}


def test_image_parts_are_kept_for_the_projector():
    image = {"type": "image_file", "image_file": {"file_id": "media-" + "0" * 24}}
    stored = session(
        msg(0, "user", [image, {"type": "text", "text": "?"}]), msg(1, "assistant", "A")
    )
    h = history(stored, "more")
    assert h.has_images
    assert h.messages[1].for_template("<m>")["content"] == "<m>?"
