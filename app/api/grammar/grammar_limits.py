"""The limits a request's grammar is held to before anything builds it, and the 400s that say
which one it broke.

A JSON schema is checked before llama-cpp-python's converter writes it out (its size and its
repetition bounds: app/api/grammar/schema_bounds.py), and every grammar, sent as GBNF or made
from a schema, before llama.cpp parses it on the engine thread (app/api/grammar/gbnf_shape.py).
`--grammar-max-bytes` and `--grammar-max-repeat` are the operator's; the nesting and fan-out
bounds below are what the engine thread's stack and time allow, not a policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.api.grammar.gbnf_shape import GbnfError, gbnf_shape
from app.api.grammar.schema_bounds import SchemaBoundError, schema_bounds
from app.engine.request import RequestError

# Stacks one step of a grammar may fan out to: llama.cpp keeps them in a vector it searches for
# each new one (quadratic) and tries every candidate token against each (an enum of 4096 values
# is 4096 stacks).
MAX_LEADS = 4096


@dataclass(slots=True, frozen=True)
class GrammarLimits:
    max_bytes: int  # --grammar-max-bytes
    max_repeat: int  # --grammar-max-repeat

    @classmethod
    def of(cls, settings: Any) -> GrammarLimits:
        return cls(settings.grammar_max_bytes, settings.grammar_max_repeat)


def check_schema(schema: Any, limits: GrammarLimits, param: str, spent: int = 0) -> int:
    """The repetitions `schema` writes out, `spent` (other schemas' of the same request)
    included; a 400 naming `param` when it is too large or its bounds ask for too many."""
    try:
        n_bytes = len(json.dumps(schema))
    except (RecursionError, ValueError):
        raise _bad(param, "the schema is nested too deeply") from None
    if n_bytes > limits.max_bytes:
        raise _bad(param, f"the schema has {n_bytes} bytes{_over(limits.max_bytes, 'bytes')}")
    try:
        bounds = schema_bounds(schema)
    except SchemaBoundError as e:
        raise _bad(param, str(e)) from None
    total = spent + bounds.total
    if total > limits.max_repeat:
        where = bounds.largest
        named = f" ({where.where} is {where.value})" if where is not None else ""
        message = f"the schema asks for {total} repetitions{named}"
        raise _bad(param, message + _over(limits.max_repeat, "repeat"))
    return total


def check_gbnf(text: str, limits: GrammarLimits, param: str, made: bool = False) -> None:
    """A 400 naming `param` unless llama.cpp can build `text` within the limits; `made`: the
    grammar was made from the request's schema (the message says so)."""
    what = "the grammar made from the schema" if made else "the grammar"
    n_bytes = len(text.encode("utf-8", "surrogatepass"))
    if n_bytes > limits.max_bytes:
        raise _bad(param, f"{what} has {n_bytes} bytes{_over(limits.max_bytes, 'bytes')}")
    try:
        shape = gbnf_shape(text)
    except GbnfError as e:
        raise _bad(param, f"{what} cannot be used: {e}") from None
    if shape.repeats > limits.max_repeat:
        message = f"{what} asks for {shape.repeats} repetitions"
        raise _bad(param, message + _over(limits.max_repeat, "repeat"))
    if shape.expanded > limits.max_bytes:
        message = f"{what} written out, repetitions included, has {shape.expanded} elements"
        raise _bad(param, message + _over(limits.max_bytes, "bytes"))
    if shape.leads > MAX_LEADS:
        message = (
            f"{what} cannot be used: one step of it can begin {shape.leads} ways (rules of "
            f"alternatives that begin with rules of alternatives); the most is {MAX_LEADS}"
        )
        raise _bad(param, message)


def _over(limit: int, setting: str) -> str:
    unit = "bytes" if setting == "bytes" else "repetitions"
    return f"; this server takes at most {limit} {unit} (--grammar-max-{setting})"


def _bad(param: str, message: str) -> RequestError:
    return RequestError(f"{param}: {message}", param=param)
