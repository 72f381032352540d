"""A streaming OpenAI-compatible client that measures what the bench reports."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import httpx


@dataclass(slots=True)
class Result:
    ttft: float  # seconds from sending to the first content token
    total: float  # seconds from sending to the end of the stream
    text: str
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int
    timings: dict = field(default_factory=dict)


# One client for the whole run (thread-safe, pooled): creating one per request costs tens of ms
# (SSL context, CA bundle) that would be counted as time to first token.
_http = httpx.Client(timeout=600, limits=httpx.Limits(max_connections=64))


def stream_chat(base_url: str, messages: list[dict], max_tokens: int = 16, **extra) -> Result:
    body = {"model": "default", "messages": messages, "max_tokens": max_tokens, **extra}
    return stream(base_url + "/v1/chat/completions", body)


def stream_session(base_url: str, session_id: str, content: str, max_tokens: int = 16) -> Result:
    """One turn through the sessions API: only the new message is sent."""
    body = {"content": content, "max_tokens": max_tokens}
    return stream(f"{base_url}/v1/sessions/{session_id}/messages", body)


def create_session(base_url: str, system_prompt: str) -> str:
    r = _http.post(base_url + "/v1/sessions", json={"system_prompt": system_prompt})
    r.raise_for_status()
    return r.json()["id"]


def stream(url: str, body: dict) -> Result:
    """POST a streaming completion request; time the first content token and the end."""
    body = {"temperature": 0, "stream": True, "stream_options": {"include_usage": True}, **body}
    t0 = time.perf_counter()
    ttft = None
    text = ""
    usage: dict = {}
    timings: dict = {}
    with _http.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"])
            for choice in chunk.get("choices", []):
                content = choice.get("delta", {}).get("content")
                if content:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text += content
            usage = chunk.get("usage") or usage
            timings = chunk.get("timings") or timings
    total = time.perf_counter() - t0
    details = usage.get("prompt_tokens_details") or {}
    return Result(
        ttft if ttft is not None else total,
        total,
        text,
        usage.get("completion_tokens", 0),
        usage.get("prompt_tokens", 0),
        details.get("cached_tokens", 0),
        timings,
    )
