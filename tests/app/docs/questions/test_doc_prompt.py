"""A document question's prompt, spliced from stored chunk ids, with the real model's template."""

from __future__ import annotations

import pytest

from app.chat.templates.prompter import Prompter
from app.docs.questions.doc_prompt import INSTRUCTION, QUESTION, DocPrompter, token_counter
from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model
from rag.layout import LayoutChunk, build, chunk_text

CHUNKS = [
    ("doc-a", 0, 1, "a.txt", None, "Owls hunt at night.\nThey fly without a sound."),
    ("doc-a", 1, 2, "a.txt", None, "Barn owls eat mice."),
    ("doc-b", 0, 3, "b.pdf", 4, "Eagles build nests (eyries) on cliffs!"),
]


@pytest.fixture(scope="module")
def model(model_path: str):
    m = Model(EngineConfig(model_path=model_path, n_ctx=512, n_parallel=1, warmup=False))
    yield m
    m.close()


def pieces(model: Model) -> list[LayoutChunk]:
    tokenize = token_counter(model)
    return [
        LayoutChunk(i, doc, ordinal, number, tuple(tokenize(chunk_text(number, f, page, text))))
        for i, (doc, ordinal, number, f, page, text) in enumerate(CHUNKS)
    ]


def test_the_spliced_prompt_spells_the_templates_text(model: Model):
    prompter = Prompter(model)
    doc = DocPrompter(prompter, model)
    question = "Where do eagles nest?"
    head, tail = doc.parts("Be brief.", question)
    layout = build(head, list(reversed(pieces(model))), tail)
    sources = "".join(chunk_text(n, f, p, t) for _, _, n, f, p, t in CHUNKS)
    text = prompter.render(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": INSTRUCTION + sources + QUESTION + question},
        ]
    )
    assert model.detokenize(layout.tokens, special=True) == model.detokenize(
        prompter.tokenize(text).tokens, special=True
    )


def test_a_chunks_ids_are_the_same_in_every_prompt(model: Model):
    doc = DocPrompter(Prompter(model), model)
    chunks = pieces(model)
    owls = chunks[1]
    for system, question, subset in [
        (None, "What do barn owls eat?", chunks[:2]),
        ("Answer in French.", "Tell me about birds.", chunks),
        (None, "Mice?", [chunks[2], owls]),
    ]:
        head, tail = doc.parts(system, question)
        tokens = build(head, subset, tail).tokens
        n = len(owls.tokens)
        assert any(tuple(tokens[i : i + n]) == owls.tokens for i in range(len(tokens) - n + 1))
        assert tokens[: len(head)] == head and tokens[-len(tail) :] == tail
