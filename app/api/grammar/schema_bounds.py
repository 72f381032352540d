"""The repetitions a JSON schema would have llama-cpp-python's converter write out, counted
before it converts anything.

The converter (`json_schema_to_gbnf`) writes every bound out in full: `maxLength: n` becomes n
nested groups, `minItems: n` n copies of the item, a pattern's `a{n}` n characters. A bound of
three billion would take tens of gigabytes before anything could check the result, so the
bounds are read first: `minLength`, `maxLength`, `minItems`, `maxItems` wherever they stand, and
the `{m}`, `{m,}`, `{m,n}` quantifiers of every `pattern`. The walk is iterative and visits each
value once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")


class SchemaBoundError(ValueError):
    """A bound that is not a whole number of zero or more; `where` is its JSON path."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where


@dataclass(slots=True, frozen=True)
class Bound:
    value: int
    where: str  # JSON path in the schema: $.properties.name.maxLength


@dataclass(slots=True, frozen=True)
class SchemaBounds:
    total: int  # every bound together, as the converter writes them
    largest: Bound | None  # the largest single bound


# Where a value stands: its parent's path and its key (rendered only when a message needs it,
# so a deep schema costs nothing per level).
Where = tuple["Where | None", str | int] | None


def schema_bounds(schema: Any) -> SchemaBounds:
    """Every repetition bound of `schema` (a schema, or any JSON value holding schemas)."""
    total, largest, largest_at = 0, 0, None
    todo: list[tuple[Any, Where]] = [(schema, None)]
    while todo:
        value, path = todo.pop()
        if isinstance(value, list):
            todo.extend((v, (path, i)) for i, v in enumerate(value))
            continue
        if not isinstance(value, dict):
            continue
        found = [(_whole(value[k], (path, k)), (path, k)) for k in BOUNDS if k in value]
        pattern = value.get("pattern")
        if isinstance(pattern, str):
            found += [(n, (path, "pattern")) for n in pattern_repeats(pattern)]
        for n, at in found:
            total += n
            if largest_at is None or n > largest:
                largest, largest_at = n, at
        todo.extend((v, (path, k)) for k, v in value.items() if isinstance(v, dict | list))
    return SchemaBounds(
        total, None if largest_at is None else Bound(largest, json_path(largest_at))
    )


def json_path(path: Where, most: int = 12) -> str:
    """`$.properties.name.maxLength`; a deep one by its last `most` steps."""
    steps: list[str | int] = []
    while path is not None:
        path, key = path
        steps.append(key)
    steps.reverse()
    shown = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in steps[-most:])
    return ("$" if len(steps) <= most else "$…") + shown


def _whole(value: Any, path: Where) -> int:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value != int(value):
        where = json_path(path)
        raise SchemaBoundError(f"{where} must be a whole number", where)
    if value < 0:
        where = json_path(path)
        raise SchemaBoundError(f"{where} must not be negative", where)
    return int(value)


def pattern_repeats(pattern: str) -> list[int]:
    """The larger bound of each `{m}`, `{m,}` and `{m,n}` quantifier of a regular expression
    that is not escaped; one inside a character class is counted too (more, never fewer)."""
    out: list[int] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        end = pattern.find("}", i) if c == "{" else -1
        if end > 0:
            low, _, high = (part.strip() for part in pattern[i + 1 : end].partition(","))
            if low.isdigit() and (not high or high.isdigit()):
                out.append(max(_count(low), _count(high) if high else 0))
                i = end
        i += 1
    return out


def _count(digits: str) -> int:
    # Python refuses to read ints of thousands of digits; any of 19 or more is too many anyway.
    return int(digits) if len(digits) < 19 else 10**18
