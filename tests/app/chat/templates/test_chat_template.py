"""`ChatTemplate`'s Jinja: tools in OpenAI's shape, and calls rendered back as written."""

from __future__ import annotations

import json

import pytest

from app.chat.messages import ChatMessage
from app.chat.templates.chat_template import ChatTemplate, ChatTemplateError, JsonText

CALLS = (
    "{% for m in messages %}{% for c in m.tool_calls %}"
    "{{ c.function.name }}={{ c.function.arguments | tojson }};"
    "{% for k, v in c.function.arguments.items() %}{{ k }}:{{ v }};{% endfor %}"
    "{% endfor %}{% endfor %}"
)


def test_tojson_writes_a_calls_arguments_back_exactly_as_they_came():
    text = '{"city":"Paris",  "days": 2}'  # compact here, spaced there: kept as it is
    message = ChatMessage.model_validate(
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": text}}]}
    )
    out = ChatTemplate(CALLS).render([message.for_template()])
    assert out == f"f={text};city:Paris;days:2;"  # the text for tojson, the object for walking


def test_arguments_that_are_not_an_object_stay_text():
    message = ChatMessage.model_validate(
        {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "[1"}}]}
    )
    assert message.for_template()["tool_calls"][0]["function"]["arguments"] == "[1"


def test_tojson_writes_like_llama_cpp_keys_in_order_and_no_html_escapes():
    tool = {"name": "z<&>'", "a": [1, "é"]}
    out = ChatTemplate("{{ tools | tojson }}").render([], tools=[tool])
    assert out == json.dumps([tool], ensure_ascii=False)
    indented = ChatTemplate("{{ tools | tojson(indent=2) }}").render([], tools=[tool])
    assert indented == json.dumps([tool], indent=2, ensure_ascii=False)


def test_json_text_is_the_object_and_keeps_its_text():
    value = JsonText('{"a": 1}', {"a": 1})
    assert value == {"a": 1} and value.text == '{"a": 1}'


def test_a_template_that_reads_tools_is_given_them_and_one_that_does_not_is_not():
    aware = ChatTemplate("{% if tools %}{{ tools | length }}{% endif %}")
    assert aware.knows_tools and aware.render([], tools=[{"type": "function"}]) == "1"
    plain = ChatTemplate("{{ messages | length }}")
    assert not plain.knows_tools


def test_loops_may_break_and_continue_as_in_llama_cpp():
    source = "{% for m in messages %}{% if loop.index == 2 %}{% break %}{% endif %}{{ m }}"
    source += "{% endfor %}"
    assert ChatTemplate(source).render([1, 2, 3]) == "1"  # type: ignore[list-item]


def test_an_undefined_value_added_to_text_is_empty_as_in_llama_cpp():
    assert ChatTemplate("{{ 'a' + nothing + 'b' }}").render([]) == "ab"
    with pytest.raises(ChatTemplateError):  # anything else about it still fails
        ChatTemplate("{{ 1 + nothing }}").render([])
