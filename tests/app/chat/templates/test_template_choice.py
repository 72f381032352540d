"""--chat-template, --chat-template-file and --jinja resolved to the template that renders."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat.templates.builtin_template import BuiltinTemplate, builtin_names
from app.chat.templates.chat_template import CHATML, ChatTemplate
from app.chat.templates.template_choice import TemplateChoice, build_template, template_choice

CHAT = [
    {"role": "system", "content": "S"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "yo"},
    {"role": "user", "content": "x"},
]
MODEL_OWN = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
TOOLS_AWARE = "{% if tools %}{{ tools | tojson }}{% endif %}" + MODEL_OWN


def test_a_builtin_name_renders_with_llama_cpps_template_jinja_or_not():
    for jinja in (True, False):
        template = build_template(template_choice("llama3", None, jinja), MODEL_OWN)
        assert isinstance(template, BuiltinTemplate) and template.source == "llama3"
        assert template.render(CHAT).endswith(
            "<|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
        )
    gemma = build_template(TemplateChoice("gemma"), None).render(CHAT)
    assert gemma.startswith("<start_of_turn>user\nS\n\nhi<end_of_turn>\n<start_of_turn>model\n")


def test_chatml_is_llama_cpps_jinja_with_jinja_and_its_cpp_template_without_the_same_text():
    jinja = build_template(TemplateChoice("chatml", jinja=True), MODEL_OWN)
    cpp = build_template(TemplateChoice("chatml", jinja=False), MODEL_OWN)
    assert isinstance(jinja, ChatTemplate) and jinja.source == CHATML
    assert isinstance(cpp, BuiltinTemplate)
    assert jinja.render(CHAT) == cpp.render(CHAT)
    assert jinja.render(CHAT, add_generation_prompt=False) == cpp.render(CHAT, False)


def test_an_unknown_name_is_refused_listing_the_names():
    with pytest.raises(ValueError, match="'nope' is not one of llama.cpp's built-in") as e:
        template_choice("nope", None, True)
    assert all(name in str(e.value) for name in ("chatml", "llama3", "gemma", "mistral-v7"))
    assert len(builtin_names()) > 40


def test_template_text_is_jinja_with_jinja_and_matched_to_a_builtin_without():
    chosen = build_template(template_choice(MODEL_OWN, None, True), None)
    assert chosen.render(CHAT[:2]) == "[system] S\n[user] hi\n"
    im = "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}"  # llama.cpp: ChatML
    cpp = build_template(template_choice(im, None, False), None)
    assert cpp.render(CHAT) == build_template(TemplateChoice("chatml"), None).render(CHAT)
    with pytest.raises(ValueError, match="--chat-template: llama.cpp has no built-in template"):
        template_choice(MODEL_OWN, None, False)
    with pytest.raises(ValueError, match="--chat-template: the chat template is not valid"):
        template_choice("{% for m in messages %}", None, True)


def test_a_template_file_is_read_and_checked(tmp_path: Path):
    good = tmp_path / "t.jinja"
    good.write_text(MODEL_OWN)
    assert template_choice(None, str(good), True) == TemplateChoice(MODEL_OWN, True)
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ messages ")
    with pytest.raises(ValueError, match="--chat-template-file: the chat template is not valid"):
        template_choice(None, str(bad), True)
    with pytest.raises(ValueError, match="cannot be read"):
        template_choice(None, str(tmp_path / "missing.jinja"), True)
    (tmp_path / "empty.jinja").write_text(" \n")
    with pytest.raises(ValueError, match="is empty"):
        template_choice(None, str(tmp_path / "empty.jinja"), True)
    with pytest.raises(ValueError, match="not both"):
        template_choice("chatml", str(good), True)


def test_without_a_choice_the_models_own_template_renders():
    assert build_template(TemplateChoice(), MODEL_OWN).source == MODEL_OWN
    assert build_template(TemplateChoice(), None).source == CHATML  # a GGUF without one
    # Without --jinja, a model template llama.cpp cannot match falls back to ChatML.
    assert build_template(TemplateChoice(jinja=False), MODEL_OWN).source == "chatml"


def test_a_template_knows_tools_when_it_reads_them():
    assert build_template(TemplateChoice(TOOLS_AWARE), None).knows_tools
    assert not build_template(TemplateChoice(MODEL_OWN), None).knows_tools
    assert not build_template(TemplateChoice("llama3"), None).knows_tools
    assert not build_template(TemplateChoice(), None).knows_tools  # ChatML
