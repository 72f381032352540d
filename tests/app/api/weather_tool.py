"""The tool the tool-calling tests offer: a weather lookup by city, in the shapes of each API."""

from __future__ import annotations

from typing import Any

NAME, DESCRIPTION = "get_weather", "The weather in a city"
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}},
    "required": ["city"],
}
# Chat completions' shape (a function inside the tool).
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {"name": NAME, "description": DESCRIPTION, "parameters": PARAMETERS},
}
# The Responses API's flat shape.
WEATHER_FLAT: dict[str, Any] = {
    "type": "function",
    "name": NAME,
    "description": DESCRIPTION,
    "parameters": PARAMETERS,
}
