"""The generic tool-call format: what is rendered parses back verbatim, text that is not a
well-formed call stays content, and a tool loop renders as one growing text."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from app.chat.messages import ChatMessage
from app.chat.sessions.session_history import turn_history
from app.chat.tool_messages import plain_messages
from app.chat.tools import ReplyParser, ToolSpec, calls_text, parse_calls
from app.db.records import MessageRecord, SessionRecord

names = st.from_regex(r"[a-zA-Z0-9_-]{1,16}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
arguments = st.dictionaries(st.text(max_size=6), json_values, max_size=3).map(
    lambda d: json.dumps(d, separators=(",", ":"), ensure_ascii=False)
)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=20), st.lists(st.tuples(names, arguments), min_size=1, max_size=3))
def test_rendered_calls_parse_back_verbatim(before: str, calls: list[tuple[str, str]]):
    text = before.replace("<tool_call>", "") + calls_text(calls)
    content, parsed = parse_calls(text, {n for n, _ in calls})
    assert [(c.name, c.arguments) for c in parsed] == calls
    assert content + calls_text([(c.name, c.arguments) for c in parsed]) == text


def test_malformed_or_unknown_calls_stay_content():
    good = calls_text([("f", '{"a":1}')])
    assert parse_calls(good, {"g"}) == (good, [])  # not one of the tools
    cut = good[:-5]
    assert parse_calls(cut, {"f"}) == (cut, [])  # cut by max_tokens
    not_object = calls_text([("f", "[1]")])
    assert parse_calls(not_object, {"f"}) == (not_object, [])
    assert parse_calls("plain text", {"f"}) == ("plain text", [])


def test_the_parser_gives_one_set_of_ids_per_reply():
    parser = ReplyParser({"f"})
    text = calls_text([("f", "{}")])
    assert parser.parse(text)[1][0].id == parser.parse(text)[1][0].id
    assert ReplyParser(set()).parse(text) == (text, [])


TOOLS = [ToolSpec("f", "d", {"type": "object"})]


def _record(i: int, role: str, content: str, **kw) -> MessageRecord:
    base = dict(
        token_ids=None,
        prompt_tokens=None,
        cached_tokens=None,
        completion_tokens=None,
        timings=None,
        finish_reason=None,
        status="complete",
        error=None,
        created_at=None,
    )
    return MessageRecord(i, "s", i, role, content, **{**base, **kw})  # type: ignore[arg-type]


def test_a_stored_tool_loop_renders_like_the_same_chat():
    args = '{"a":1}'
    chat = [
        ChatMessage(role="system", content="sys"),
        ChatMessage(role="user", content="q"),
        ChatMessage.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": args}}],
            }
        ),
        ChatMessage(role="tool", content="r1", tool_call_id="c1"),
    ]
    plain = plain_messages(chat, TOOLS)
    assert [m.role for m in plain] == ["system", "user", "assistant", "user"]
    assert plain[2].content == calls_text([("f", args)])
    assert plain[3].content == "<tool_response>\nr1\n</tool_response>"
    calls = [{"id": "c1", "name": "f", "arguments": args}]
    session = SessionRecord(
        "s",
        None,
        "sys",
        {},
        None,
        None,
        3,
        [  # type: ignore[arg-type]
            _record(0, "user", "q"),
            _record(1, "assistant", "", tool_calls=calls, token_ids=[1, 2]),
            _record(2, "tool", "r1", tool_call_id="c1"),
        ],
    )
    h = turn_history(session, [], TOOLS)
    assert [m.for_template() for m in h.messages] == [m.for_template() for m in plain]
    assert h.replies == {2: [1, 2]}
