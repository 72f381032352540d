"""A stored response's id names its session and the last message of its input."""

from __future__ import annotations

from app.chat.sessions.stored_responses import parse_response_id, response_id


def test_a_response_id_reads_back_as_its_session_and_message():
    rid = response_id("ses_a_b", 42)
    assert rid == "resp_ses_a_b_42"
    assert parse_response_id(rid) == ("ses_a_b", 42)


def test_ids_that_name_no_stored_response_read_as_none():
    for rid in ("chatcmpl_x_1", "resp_", "resp_x_", "resp__1", "resp_x_1a", "resp_x_" + "9" * 19):
        assert parse_response_id(rid) is None
