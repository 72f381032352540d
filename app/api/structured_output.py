"""What a request asks of the reply's form: response_format, grammar and a forced tool call
(app/api/tool_grammar.py) become a GBNF grammar for llama.cpp's grammar sampler (as
llama-server does); `functions` and tools where a route takes none are refused in plain words.

llama-cpp-python's converter (`json_schema_to_gbnf`, a port of llama.cpp's
json_schema_to_grammar.py) turns a JSON schema into GBNF; `json_object` without a schema
takes its generic JSON grammar. A schema is checked before it is converted and every grammar
before the engine parses it (app/api/grammar/grammar_limits.py), off the event loop, once per
request however many generations it makes.
"""

from __future__ import annotations

import json

from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.api.grammar.grammar_limits import GrammarLimits, check_gbnf, check_schema
from app.api.schemas import GenerationFields
from app.api.services import Services
from app.api.tool_grammar import tool_grammar
from app.engine.request import GenerationRequest, RequestError
from app.engine.sampler import fold_biases, token_biases

# Logit biases a request may give by token id without a thread hop (they are used as given).
FEW_BIASES = 64


def refuse_unsupported(body: GenerationFields) -> None:
    """Fields this server cannot honour: a 400 that says so rather than a reply ignoring them."""
    for name in ("tools", "functions"):
        if name == "tools" and body.takes_tools:
            continue
        if getattr(body, name):
            raise RequestError(
                f"{name}: function calling is not supported by this server; send the request "
                f"without {name!r} (response_format with a json_schema can shape the reply)",
                param=name,
                code="unsupported_parameter",
            )
    shapes = [n for n in ("response_format", "grammar", "json_schema") if getattr(body, n)]
    if len(shapes) > 1:
        raise RequestError(f"send one of {' and '.join(shapes)}, not both", param=shapes[0])
    if body.forced_calls() is not None:
        shaped = body.response_format is not None and body.response_format.type != "text"
        if shaped or body.grammar or body.json_schema is not None:
            raise RequestError(
                "tool_choice asks for a tool call, which the reply's grammar writes: send it "
                "without response_format, grammar or json_schema",
                param="tool_choice",
            )


def grammar_of(body: GenerationFields, limits: GrammarLimits) -> str | None:
    """The GBNF grammar the reply must follow, or None; a 400 for one over `limits`. Worker
    thread: a big schema takes a while to convert."""
    if body.grammar:
        check_gbnf(body.grammar, limits, "grammar")
        return body.grammar
    forced = body.forced_calls()
    if forced is not None:
        return tool_grammar(forced, body.parallel_calls(), limits)
    if body.json_schema is not None:
        return _schema_grammar(body.json_schema, "json_schema", limits)
    fmt = body.response_format
    if fmt is None or fmt.type == "text":
        return None
    try:
        schema = fmt.schema_or_none()
    except ValueError as e:
        raise _bad(str(e), "response_format") from None
    return JSON_GBNF if schema is None else _schema_grammar(schema, "response_format", limits)


def _schema_grammar(schema: dict, param: str, limits: GrammarLimits) -> str:
    check_schema(schema, limits, param)  # before the converter writes any bound out
    try:
        grammar = json_schema_to_gbnf(json.dumps(schema))
    except RecursionError:
        raise _bad("the schema is nested too deeply", param) from None
    except Exception as e:  # the converter raises many kinds for schemas it cannot take
        raise _bad(f"the schema cannot be turned into a grammar: {e}", param) from None
    check_gbnf(grammar, limits, param, made=True)
    return grammar


def _bad(message: str, param: str) -> RequestError:
    return RequestError(f"{param}: {message}", param=param)


def _shaped(body: GenerationFields) -> bool:
    fmt = body.response_format
    shaped = fmt is not None and fmt.type != "text"
    return (
        bool(body.grammar)
        or shaped
        or body.json_schema is not None
        or (body.forced_calls() is not None)
    )


async def finish_request(
    request: GenerationRequest,
    body: GenerationFields,
    salt: str,
    prompt_param: str,
    services: Services,
) -> GenerationRequest:
    """What every route sets on its engine request: the server-derived salt, the field that
    errors about the prompt name, the grammar of response_format and the logit biases by token
    (both off the event loop, once per body however many generations it makes)."""
    request.cache_salt = salt
    request.prompt_param = prompt_param
    sampling = request.sampling
    if _shaped(body):
        limits = GrammarLimits.of(services.settings)
        sampling.grammar = await body.once("grammar", lambda: grammar_of(body, limits))
    else:  # nothing to convert: no thread hop on the way to the first token
        sampling.grammar = None
    biases = sampling.logit_bias
    if len(biases) > FEW_BIASES or any(isinstance(key, str) for key, _ in biases):
        # Texts by their tokens (as llama-server tokenizes them), and each token once: the
        # engine thread builds its sampler from at most one entry per token of the vocabulary.
        vocab = services.engine.tokenizer

        def tokenize(text: str) -> list[int]:
            return vocab.tokenize(text, False, False)

        sampling.logit_bias = await body.once(
            "logit_bias", lambda: fold_biases(token_biases(biases, tokenize))
        )
    return request
