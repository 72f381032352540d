"""ReplyMemory: replies by tenant and document, bounded, forgotten with their documents."""

from __future__ import annotations

from app.engine.speculation.reply_memory import ReplyMemory

REPLY = [5, 6, 7, 8, 9, 10]


def test_a_reply_drafts_for_its_documents_and_tenant_only():
    memory = ReplyMemory(2)
    memory.add("tenant-a", frozenset({"d1", "d2"}), REPLY)
    found = memory.replies("tenant-a", frozenset({"d2", "d9"}))
    assert len(found) == 1 and found[0].match([6, 7], 3, 2)[0] == [8, 9, 10]
    assert memory.replies("tenant-b", frozenset({"d1"})) == []
    assert memory.replies("tenant-a", frozenset({"d3"})) == []


def test_forgetting_a_document_drops_every_reply_on_it():
    memory = ReplyMemory(2)
    memory.add("t", frozenset({"d1", "d2"}), REPLY)
    memory.add("t", frozenset({"d2"}), [1, 2, 3, 4])
    memory.forget({"d1"})
    found = memory.replies("t", frozenset({"d2"}))
    assert [r.tokens for r in found] == [[1, 2, 3, 4]]  # the reply that also read d1 is gone


def test_bounded_per_document_and_in_documents():
    memory = ReplyMemory(2, per_document=2, max_documents=2)
    for i in range(3):
        memory.add("t", frozenset({"d1"}), [i, 1, 2, 3])
    assert [r.tokens[0] for r in memory.replies("t", frozenset({"d1"}))] == [2, 1]
    memory.add("t", frozenset({"d2"}), REPLY)
    memory.add("t", frozenset({"d3"}), REPLY)
    assert memory.replies("t", frozenset({"d1"})) == []  # least recently used went first


def test_short_replies_and_no_documents_are_ignored():
    memory = ReplyMemory(3)
    memory.add("t", frozenset({"d1"}), [1, 2])
    memory.add("t", frozenset(), REPLY)
    assert memory.replies("t", frozenset({"d1"})) == []


def test_the_end_of_the_prompt_is_context_for_a_match_and_never_drafted():
    memory = ReplyMemory(2)
    memory.add("t", frozenset({"d1"}), [5, 6, 7, 8], lead=[1, 2, 3])
    (reply,) = memory.replies("t", frozenset({"d1"}))
    assert reply.match([1, 2, 3], 4, 16) == ([5, 6, 7, 8], 3)  # agrees over the whole lead
    assert reply.match([9, 2, 3], 4, 16) == ([5, 6, 7, 8], 2)
    assert reply.match([0, 1, 2], 4, 16) == ([], 0)  # inside the lead: nothing to draft
