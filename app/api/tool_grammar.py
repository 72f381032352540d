"""The grammar of a reply that must call a tool (`tool_choice` `required` or a named function):
calls in the generic format of app/chat/tools.py whose arguments follow each function's JSON
schema, so they always parse and validate.

Each function's schema becomes rules of one llama.cpp schema converter (named after the tool,
so two tools' rules never clash); the framing around them is literal text, written exactly as
app/chat/tools.py renders a call back into the prompt.
"""

from __future__ import annotations

import json
import re

from llama_cpp.llama_grammar import SchemaConverter

from app.api.grammar.grammar_limits import GrammarLimits, check_gbnf, check_schema
from app.chat.tools import CALL_CLOSE, SEPARATOR, ToolSpec, call_head
from app.engine.request import RequestError

SPACE = re.compile(r"^space ::= .*$", re.MULTILINE)


def _literal(text: str) -> str:
    return json.dumps(text)  # GBNF literals take JSON's escapes


def tool_grammar(tools: list[ToolSpec], parallel: bool, limits: GrammarLimits) -> str:
    """GBNF for one call (or, with `parallel`, one or more) of any of `tools`; a 400 for
    schemas or a grammar over `limits`. Worker thread: a big schema takes a while to convert."""
    spent = 0  # the tools' repetitions together: they all go into one grammar
    for i, tool in enumerate(tools):
        spent = check_schema(tool.parameters, limits, _param(i), spent)
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    alternatives = []
    for i, tool in enumerate(tools):
        try:
            schema = converter.resolve_refs(tool.parameters, f"tool{i}")
            rule = converter.visit(schema, f"tool{i}-args")
        except RecursionError:
            raise _bad(i, "the schema is nested too deeply") from None
        except Exception as e:  # the converter raises many kinds for schemas it cannot take
            raise _bad(i, f"the schema cannot be turned into a grammar: {e}") from None
        alternatives.append(f"{_literal(call_head(tool.name))} {rule}")
    call = "(" + " | ".join(alternatives) + f") {_literal(CALL_CLOSE)}"
    root = f"call ({_literal(SEPARATOR)} call)*" if parallel else "call"
    # No optional whitespace inside arguments: compact JSON is what an API that hands the
    # arguments over as an object (Anthropic's tool_use `input`) renders back, so a call it
    # returns extends the prompt as the model wrote it.
    rules = SPACE.sub('space ::= ""', converter.format_grammar())
    grammar = f"root ::= {root}\ncall ::= {call}\n{rules}\n"
    check_gbnf(grammar, limits, "tools", made=True)
    return grammar


def _param(index: int) -> str:
    return f"tools[{index}].function.parameters"


def _bad(index: int, message: str) -> RequestError:
    return RequestError(f"{_param(index)}: {message}", param=_param(index))
