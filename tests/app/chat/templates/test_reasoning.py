"""Reasoning split: whole replies, and streams cut anywhere, agree."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.chat.templates.reasoning import (
    ReplySplit,
    Thinking,
    opened_in_prompt,
    split_reasoning,
)

DEEPSEEK = Thinking("deepseek")


def test_a_thought_then_an_answer() -> None:
    assert split_reasoning("<think>\nsum it up\n</think>\n\nIt is 4.", DEEPSEEK) == (
        "sum it up",
        "It is 4.",
    )


def test_text_without_a_thought_is_left_as_it_came() -> None:
    assert split_reasoning("  Hello <think>x</think>", DEEPSEEK) == (
        None,
        "  Hello <think>x</think>",
    )


def test_an_unclosed_thought_is_all_reasoning() -> None:
    assert split_reasoning("<think> still going", DEEPSEEK) == ("still going", "")


def test_forced_open_needs_no_opening_tag() -> None:
    thinking = Thinking("auto", forced_open=True)
    assert split_reasoning("plan it</think>Done", thinking) == ("plan it", "Done")


def test_none_keeps_the_tags_in_the_content() -> None:
    text = "<think>a</think>b"
    assert split_reasoning(text, Thinking("none")) == (None, text)


def test_legacy_keeps_the_tags_and_fills_reasoning() -> None:
    text = "<think>a</think>b"
    assert split_reasoning(text, Thinking("deepseek-legacy")) == ("a", text)


def test_a_reply_that_is_only_the_start_of_the_tag_is_content() -> None:
    assert split_reasoning("<thi", DEEPSEEK) == (None, "<thi")


def test_the_prompt_opens_a_thought_when_it_ends_with_the_tag() -> None:
    assert opened_in_prompt("<|im_start|>assistant\n<think>\n")
    assert not opened_in_prompt("<|im_start|>assistant\n")


def _streamed(text: str, cuts: list[int], thinking: Thinking) -> tuple[str | None, str]:
    split = ReplySplit(thinking)
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    pieces = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        pieces.extend(split.feed(text[a:b]))
    pieces.extend(split.finish())
    assert all(piece for _, piece in pieces)  # nothing empty is ever sent
    reasoning = "".join(p for k, p in pieces if k == "reasoning")
    return reasoning or None, "".join(p for k, p in pieces if k == "content")


_words = st.sampled_from(["<think>", "</think>", "<", "</", "think", ">", " ", "\n", "a", "b c"])


@given(
    text=st.lists(_words, max_size=12).map("".join),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    fmt=st.sampled_from(["none", "deepseek", "deepseek-legacy", "auto"]),
    forced=st.booleans(),
)
def test_a_stream_cut_anywhere_joins_to_the_whole_split(
    text: str, cuts: list[int], fmt: str, forced: bool
) -> None:
    thinking = Thinking(fmt, forced_open=forced)  # type: ignore[arg-type]
    assert _streamed(text, cuts, thinking) == split_reasoning(text, thinking)


@given(text=st.lists(_words, max_size=12).map("".join))
def test_nothing_is_lost_but_blank_space_and_the_tags(text: str) -> None:
    reasoning, content = split_reasoning(text, DEEPSEEK)
    kept = "".join(((reasoning or "") + content).split())
    whole = "".join(text.split())
    if reasoning is None and not whole.startswith("<think>"):
        assert kept == whole
    else:  # the opening tag, and the first closing one after it, are gone
        rest = whole.removeprefix("<think>")
        assert kept in {rest, rest.replace("</think>", "", 1)}
