"""What a request asks of the reply's form: response_format, grammar and a forced tool call
(app/api/tool_grammar.py) become a GBNF grammar for llama.cpp's grammar sampler (as
llama-server does); `functions` and tools where a route takes none are refused in plain words.

llama-cpp-python's converter (`json_schema_to_gbnf`, a port of llama.cpp's
json_schema_to_grammar.py) turns a JSON schema into GBNF; `json_object` without a schema
takes its generic JSON grammar.
"""

from __future__ import annotations

import asyncio
import json

from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.api.schemas import GenerationFields
from app.api.tool_grammar import tool_grammar
from app.engine.request import GenerationRequest, RequestError


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


def grammar_of(body: GenerationFields) -> str | None:
    """The GBNF grammar the reply must follow, or None. Worker thread: a big schema takes a
    while to convert."""
    if body.grammar:
        return body.grammar
    forced = body.forced_calls()
    if forced is not None:
        return tool_grammar(forced, body.parallel_calls())
    if body.json_schema is not None:
        return _schema_grammar(body.json_schema, "json_schema")
    fmt = body.response_format
    if fmt is None or fmt.type == "text":
        return None
    try:
        schema = fmt.schema_or_none()
    except ValueError as e:
        raise _bad(str(e), "response_format") from None
    return JSON_GBNF if schema is None else _schema_grammar(schema, "response_format")


def _schema_grammar(schema: dict, param: str) -> str:
    try:
        return json_schema_to_gbnf(json.dumps(schema))
    except RecursionError:
        raise _bad("the schema is nested too deeply", param) from None
    except Exception as e:  # the converter raises many kinds for schemas it cannot take
        raise _bad(f"the schema cannot be turned into a grammar: {e}", param) from None


def _bad(message: str, param: str) -> RequestError:
    return RequestError(f"{param}: {message}", param=param)


async def finish_request(
    request: GenerationRequest, body: GenerationFields, salt: str, prompt_param: str
) -> GenerationRequest:
    """What every route sets on its engine request: the server-derived salt, the field that
    errors about the prompt name, and the grammar of response_format (off the event loop)."""
    request.cache_salt = salt
    request.prompt_param = prompt_param
    fmt = body.response_format
    shaped = fmt is not None and fmt.type != "text"
    if body.grammar or shaped or body.json_schema is not None or body.forced_calls() is not None:
        request.sampling.grammar = await asyncio.to_thread(grammar_of, body)
    else:  # nothing to convert: no thread hop on the way to the first token
        request.sampling.grammar = None
    return request
