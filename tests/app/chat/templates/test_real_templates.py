"""Real models' chat templates (copies of llama.cpp's, in templates/) rendered with what
llama-server gives them: `enable_thinking` from --reasoning, today's date, the generation prompt
only when asked; the prompt endings are those llama-server's own template tests expect."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from app.chat.templates.chat_template import ChatTemplate
from app.chat.templates.prompter import thinking_default

TEMPLATES = Path(__file__).parent
QUESTION = [{"role": "user", "content": "What is today?"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "test",
        "description": "",
        "parameters": {"type": "object", "properties": {"success": {"type": "boolean"}}},
    },
}


def template(name: str) -> ChatTemplate:
    return ChatTemplate((TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8"))


@pytest.mark.parametrize("tools", [None, [], [TOOL]])
@pytest.mark.parametrize(
    "name,mode,end",
    [
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "on", "<think>\n"),
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "auto", "<think>\n"),
        ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "off", "<think>\n</think>"),
        ("Qwen-Qwen3-0.6B", "auto", "<|im_start|>assistant\n"),
        ("Qwen-Qwen3-0.6B", "off", "<|im_start|>assistant\n<think>\n\n</think>\n\n"),
        ("Qwen-QwQ-32B", "auto", "<|im_start|>assistant\n<think>\n"),
        ("Qwen-QwQ-32B", "off", "<|im_start|>assistant\n<think>\n</think>"),
    ],
)
def test_reasoning_mode_sets_enable_thinking_as_llama_server(
    name: str, mode: str, end: str, tools: list | None
):
    chosen = template(name)
    thinking = thinking_default(mode, chosen.supports_thinking)
    prompt = chosen.render(QUESTION, True, tools, enable_thinking=thinking)
    assert prompt.endswith(end), prompt


def test_a_template_thinks_when_enable_thinking_changes_its_prompt():
    assert template("Qwen-QwQ-32B").supports_thinking
    assert template("Qwen-Qwen3-0.6B").supports_thinking
    assert not template("meta-llama-Llama-3.3-70B-Instruct").supports_thinking
    assert not ChatTemplate(None).supports_thinking  # ChatML
    # auto is on only where the template can think; on and off are what they say
    assert thinking_default("auto", True) and not thinking_default("auto", False)
    assert thinking_default("on", False) and not thinking_default("off", True)


@pytest.mark.parametrize("tools", [None, [], [TOOL]])
@pytest.mark.parametrize(
    "name,form",
    [
        ("meta-llama-Llama-3.3-70B-Instruct", "%d %b %Y"),
        ("fireworks-ai-llama-3-firefunction-v2", "%b %d %Y"),
    ],
)
def test_todays_date_is_inside_the_prompt(name: str, form: str, tools: list | None):
    before = datetime.date.today().strftime(form)
    prompt = template(name).render(QUESTION, True, tools, enable_thinking=False)
    after = datetime.date.today().strftime(form)  # the day may turn while it renders
    assert before in prompt or after in prompt, prompt


@pytest.mark.parametrize("add", [False, True])
def test_the_generation_prompt_is_there_only_when_asked(add: bool):
    prompt = template("meta-llama-Llama-3.3-70B-Instruct").render(QUESTION, add)
    assert ("<|start_header_id|>assistant<|end_header_id|>" in prompt) == add


def test_add_generation_prompt_is_undefined_when_false_as_in_llama_cpp():
    probe = ChatTemplate("{{ add_generation_prompt is defined }}")
    assert probe.render([], False) == "False" and probe.render([], True) == "True"
