"""The packaged model's prompter, and a one-chunk collection's whole prefix made with it (as
app/docs/questions/full_chat.py makes one), for the chat tests of full-document mode."""

from __future__ import annotations

import pytest

from app.chat.templates.prompter import Prompter
from app.chat.turn_sources import WholeSources
from app.docs.questions.doc_prompt import (
    DEFAULT_SYSTEM_PROMPT,
    INSTRUCTION,
    QUESTION,
    SENTINEL,
    DocPrompter,
)
from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model

CHUNK = "[1] harbour.txt\nThe harbour was built in 1642.\n\n"


@pytest.fixture(scope="module")
def model(model_path: str):
    model = Model(EngineConfig(model_path=model_path, n_ctx=512, n_parallel=1))
    yield model
    model.close()


@pytest.fixture(scope="module")
def prompter(model: Model) -> Prompter:
    return Prompter(model)


@pytest.fixture(scope="module")
def whole(prompter: Prompter, model: Model) -> WholeSources:
    """A one-chunk collection's prefix, as app/docs/questions/full_chat.py makes it."""
    head, _ = DocPrompter(prompter, model).parts(None, "")  # type: ignore[arg-type]
    chunk = model.tokenize(CHUNK, add_special=False, parse_special=False)
    return WholeSources(
        [*head, *chunk],
        len(head),
        DEFAULT_SYSTEM_PROMPT,
        INSTRUCTION + SENTINEL,
        SENTINEL,
        QUESTION,
        frozenset({"doc-1"}),
        lambda answer: [],
        lambda n, limit: n + (limit or 0) - 100,  # a context of 100 after the prefix
        "k",
    )
