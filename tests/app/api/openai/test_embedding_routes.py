"""POST /v1/embeddings through a real server, with the official OpenAI SDK."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import openai
import pytest

from bench.lib.server_process import ServerProcess
from rag.embedder import DEFAULT_BACKEND, load_embedder


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess("-np", "1", "-c", "512", "-n", "8") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)


def _vectors(client: openai.OpenAI, texts: list[str], **kw) -> np.ndarray:
    got = client.embeddings.create(model="any", input=texts, **kw)
    assert [d.index for d in got.data] == list(range(len(texts)))
    assert got.usage.prompt_tokens > len(texts)  # the model's tokens, special ones included
    return np.array([d.embedding for d in got.data], dtype=np.float32)


def test_a_paraphrase_ranks_above_an_unrelated_text(client: openai.OpenAI):
    query, para, other = _vectors(
        client,
        [
            "How do I reset my password?",
            "What are the steps to change a forgotten password?",
            "The recipe needs two cups of flour and an egg.",
        ],
    )
    assert float(query @ para) > float(query @ other)
    assert np.allclose(np.linalg.norm([query, para, other], axis=1), 1.0, atol=1e-4)


def test_base64_and_float_give_the_same_vectors_as_the_documents_embedder(
    client: openai.OpenAI,
):
    texts = ["kv cache reuse", "a second text"]
    b64 = _vectors(client, texts)  # the SDK asks for base64 unless told, and decodes it
    floats = _vectors(client, texts, encoding_format="float")
    assert np.allclose(b64, floats, atol=1e-6)
    local = load_embedder(DEFAULT_BACKEND).embed(texts)  # what ingestion and /search use
    assert np.allclose(floats, local, atol=1e-4)


def test_a_single_string_gives_one_vector(client: openai.OpenAI):
    got = client.embeddings.create(model="any", input="hello", encoding_format="float")
    assert len(got.data) == 1 and len(got.data[0].embedding) == 384


def test_llama_servers_input_forms_are_texts(server: ServerProcess):
    """Token ids (of the chat model), ids and texts mixed, prompt objects and text parts: each
    the text it stands for; an empty text too."""

    def vectors(value: object) -> list[list[float]]:
        r = httpx.post(server.base_url + "/v1/embeddings", json={"input": value}, timeout=60)
        assert r.status_code == 200, r.text
        return [d["embedding"] for d in r.json()["data"]]

    ids = httpx.post(server.base_url + "/tokenize", json={"content": "hello world"}).json()
    hello = vectors("hello world")
    parts = {"content": [{"type": "text", "text": "hello "}, {"type": "text", "text": "world"}]}
    for same in (ids["tokens"], {"prompt_string": "hello world"}, parts):
        assert np.allclose(vectors(same), hello, atol=1e-5)
    assert len(vectors(["a", ids["tokens"], {"prompt_string": "b"}])) == 3
    assert len(vectors("")) == 1


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"input": []}, "input", "must not be empty"),
        ({"input": {"content": "x"}}, "input", "a list of text content parts"),
        ({"input": ["a", {"content": [{"type": "image_url"}]}]}, "input", "item 1 content takes"),
        ({"input": ["x"] * 2049}, "input", "at most 2048 texts"),
        ({"input": [[99999999]]}, "input", "token ids are this server's model's"),
        ({"input": "word " * 400}, "input", "the embedding model takes at most 256"),
        ({"input": "a", "dimensions": 7}, "dimensions", "384 dimensions only"),
        ({"input": "a", "encoding_format": "int8"}, "encoding_format", "'float' or 'base64'"),
    ],
)
def test_bad_input_is_a_clear_400(server: ServerProcess, body: dict, param: str, words: str):
    r = httpx.post(server.base_url + "/v1/embeddings", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error
    assert error["type"] == "invalid_request_error"
