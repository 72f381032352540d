"""A JSON schema's repetition bounds, counted before the converter writes any out."""

from __future__ import annotations

import pytest

from app.api.grammar.schema_bounds import (
    Bound,
    SchemaBoundError,
    pattern_repeats,
    schema_bounds,
)


def test_every_bound_wherever_it_stands_is_counted():
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 3_000_000_000},
            "tags": {"type": "array", "items": {"pattern": "^a{2,7}$"}, "maxItems": 10},
        },
        "anyOf": [{"type": "array", "minItems": 5}],
        "$defs": {"x": {"type": "string", "maxLength": 3}},
    }
    bounds = schema_bounds(schema)
    assert bounds.total == 1 + 3_000_000_000 + 7 + 10 + 5 + 3
    assert bounds.largest == Bound(3_000_000_000, "$.properties.name.maxLength")


def test_a_schema_without_bounds_counts_none():
    assert schema_bounds({"type": "object", "properties": {}}).total == 0
    assert schema_bounds({}).largest is None


@pytest.mark.parametrize("value", [1.5, -1, "10", True, float("inf")])
def test_a_bound_that_is_not_a_whole_number_is_refused(value: object):
    with pytest.raises(SchemaBoundError) as e:
        schema_bounds({"items": {"minItems": value}})
    assert e.value.where == "$.items.minItems"


def test_a_patterns_quantifiers_are_read():
    assert pattern_repeats("^a{3}b{2,}c{1,9}$") == [3, 2, 9]
    assert pattern_repeats(r"\{9}x{ 4 , 5 }") == [5]  # an escaped brace is a character
    assert pattern_repeats("[{7}]") == [7]  # in a class too: more, never fewer
    assert pattern_repeats("a{x}b{}") == []
    assert pattern_repeats("a{" + "9" * 5000 + "}") == [10**18]  # not read as an int


def test_a_deep_schema_is_walked_without_recursion():
    schema: dict = {"maxLength": 1}
    for _ in range(50_000):
        schema = {"items": schema}
    assert schema_bounds(schema).total == 1
