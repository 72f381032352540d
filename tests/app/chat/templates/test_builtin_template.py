"""llama.cpp's C++ chat templates through `llama_chat_apply_template`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.chat.templates.builtin_template import (
    BuiltinTemplate,
    apply_template,
    builtin_names,
    is_known,
)


def test_the_names_are_llama_cpps_and_an_unknown_one_renders_nothing():
    assert {"chatml", "llama3", "gemma", "mistral-v7", "phi3", "zephyr"} <= set(builtin_names())
    assert apply_template("nope", [{"role": "user", "content": "hi"}], True) is None
    assert not is_known("nope") and is_known("<|im_start|>")  # matched by its markers
    with pytest.raises(ValueError, match="no built-in chat template like 'nope'"):
        BuiltinTemplate("nope")


def test_a_rendering_longer_than_the_first_buffer_comes_whole():
    messages = [{"role": "user", "content": ""}, {"role": "assistant", "content": "é"}] * 100
    text = BuiltinTemplate("llama3").render(messages, add_generation_prompt=False)
    assert text.count("<|start_header_id|>assistant<|end_header_id|>\n\né<|eot_id|>") == 100


# Built-ins whose rendering of a reply is the text before it plus the reply verbatim (llama3,
# gemma and others trim the reply: they extend only for replies without surrounding space).
EXTENDING = ["chatml", "phi3", "zephyr", "llama2", "deepseek3", "granite", "mistral-v7-tekken"]
texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
)


@given(st.sampled_from(EXTENDING), st.lists(st.tuples(texts, texts), min_size=1, max_size=3))
def test_a_builtin_templates_next_turn_extends_the_last(name: str, turns: list[tuple[str, str]]):
    """Turn N+1's prompt text starts with turn N's prompt and reply: the history's KV is reused."""
    template = BuiltinTemplate(name)
    messages: list[dict[str, str]] = []
    for ask, reply in turns:
        messages.append({"role": "user", "content": ask})
        before = template.render(messages)
        messages.append({"role": "assistant", "content": reply})
        after = template.render([*messages, {"role": "user", "content": "next"}])
        assert after.startswith(before + reply)
