"""A streaming OpenAI-compatible client that measures what the bench reports.

It works against any OpenAI-compatible server: token counts come from `usage` (with
`stream_options.include_usage`), cached tokens from `usage.prompt_tokens_details.cached_tokens`
or llama-server's `timings.cache_n`. A server that reports neither (llama-cpp-python's streams
carry no usage) gets None for prompt and cached tokens, and its completion tokens are counted
as streamed content chunks (one token each on the servers the bench drives).
"""

from __future__ import annotations

import contextlib
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
    prompt_tokens: int | None  # None: the server did not report it
    cached_tokens: int | None  # None: the server did not report it
    timings: dict = field(default_factory=dict)
    replica: str | None = None  # the X-Replica header (a server behind nginx names itself)

    def as_dict(self) -> dict:
        return {
            "ttft": self.ttft,
            "total": self.total,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
        }


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
    request = _http.build_request("POST", url, json=body)
    for attempt in range(2):
        t0 = time.perf_counter()
        try:
            resp = _http.send(request, stream=True)
            break
        except httpx.RemoteProtocolError:
            # The server closed a kept-alive connection just as the request went out, before
            # answering (llama-server's HTTP library closes one after a few requests): nothing
            # was processed, so send it again on a new connection, timed from there.
            if attempt:
                raise
    ttft = None
    text = ""
    chunks = 0
    usage: dict = {}
    timings: dict = {}
    with contextlib.closing(resp):
        if resp.is_error:
            resp.read()
            raise RuntimeError(f"{url}: HTTP {resp.status_code}: {resp.text[:500]}")
        for line in resp.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(chunk["error"])
            for choice in chunk.get("choices") or []:
                content = (choice.get("delta") or {}).get("content")
                if content:
                    if ttft is None:
                        ttft = time.perf_counter() - t0
                    text += content
                    chunks += 1
            usage = chunk.get("usage") or usage
            timings = chunk.get("timings") or timings
    total = time.perf_counter() - t0
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if cached is None:
        cached = timings.get("cache_n")
    prompt = usage.get("prompt_tokens")
    if prompt is None and "prompt_n" in timings:
        prompt = timings["prompt_n"] + timings.get("cache_n", 0)
    return Result(
        ttft if ttft is not None else total,
        total,
        text,
        usage.get("completion_tokens", chunks),
        prompt,
        cached,
        timings,
        resp.headers.get("x-replica"),
    )
