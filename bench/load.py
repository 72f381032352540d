"""`python -m bench.load`: a bounded load test with locust, headless, on loopback only.

32 users (default) on a server with 4 slots mix chats with a shared system prompt, session
turns, image questions (the tiny test projector) and questions about a document; each user
has one of four tenants' API keys. The run stops by itself after --duration seconds. Then
every session's stored messages are read back: each turn that got its reply must be there.

Prints (and writes to bench/results/load.md) requests, 5xx (must be 0; a 503 with Retry-After
for a full queue is counted apart), and p50/p95 time to first token per kind.
"""

# locust patches the standard library (gevent); it must come before everything else.
from locust import HttpUser, between, task  # isort: skip
from locust.env import Environment  # isort: skip

import argparse  # noqa: E402
import base64  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import gevent  # noqa: E402
import httpx  # noqa: E402
from PIL import Image  # noqa: E402

from bench.lib.server_process import ROOT, ServerProcess, make_key  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "load.md"
SYSTEM = (
    "You are the help desk of a city library. Opening hours are nine to six on weekdays and ten "
    "to four on Saturdays; the library is closed on Sundays. Members may borrow up to ten books "
    "for three weeks. Answer in one short sentence."
)
DOCUMENT = (
    "Maintenance manual, section 4. The pump must be switched off before the filter is opened. "
    "Filters are replaced every six months, or sooner when the pressure gauge reads above two "
    "bar. The seal of the filter housing is checked at every replacement and changed when it "
    "shows cracks. After a replacement the pump is started at low speed for five minutes, and "
    "the log book records the date, the reading of the gauge and the name of the technician. "
) * 3
QUESTIONS = ["When are you open?", "How many books?", "Are you open on Sunday?", "Can I renew?"]
DOC_QUESTIONS = ["How often are filters replaced?", "What is recorded?", "What about the seal?"]


@dataclass
class Record:
    """What the users saw: TTFT per kind, statuses, and each session's completed turns."""

    ttft: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    retry_after_missing: int = 0
    sessions: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (key, turns)


RECORD = Record()
CONFIG: dict[str, object] = {}


def tiny_png(seed: int) -> str:
    rng = random.Random(seed)
    image = Image.new("RGB", (32, 32), (rng.randrange(256), rng.randrange(256), 90))
    out = io.BytesIO()
    image.save(out, "PNG")
    return "data:image/png;base64," + base64.b64encode(out.getvalue()).decode()


class ChatUser(HttpUser):
    wait_time = between(0.2, 1.5)

    def on_start(self) -> None:
        keys: list[str] = CONFIG["keys"]  # type: ignore[assignment]
        self.key = random.choice(keys)
        self.headers = {"Authorization": f"Bearer {self.key}"}
        self.session: str | None = None
        self.turns = 0

    def _stream(self, kind: str, path: str, body: dict) -> bool:
        """POST a streaming request; record TTFT and status. True if the reply completed."""
        body = {**body, "stream": True, "max_tokens": CONFIG["max_tokens"], "temperature": 0}
        started = time.perf_counter()
        with self.client.post(
            path, json=body, headers=self.headers, stream=True, name=kind, catch_response=True
        ) as r:
            RECORD.statuses[kind].append(r.status_code)
            if r.status_code != 200:
                if r.status_code == 503 and "Retry-After" not in r.headers:
                    RECORD.retry_after_missing += 1
                r.failure(f"{r.status_code}: {r.text[:200]}")
                return False
            first, done = None, False
            for line in r.iter_lines():
                if not line.startswith(b"data: "):
                    continue
                if line == b"data: [DONE]":
                    done = True
                    break
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    r.failure(chunk["error"]["message"])
                    return False
                choice = (chunk.get("choices") or [{}])[0]
                text = (choice.get("delta") or {}).get("content") or choice.get("text")
                # The first token (not the opening role chunk), or the end of an empty reply.
                if first is None and (text or choice.get("finish_reason")):
                    first = time.perf_counter() - started
            if first is not None:
                RECORD.ttft[kind].append(first)
            if not done:
                r.failure("the stream ended without [DONE]")
            return done

    @task(4)
    def chat(self) -> None:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ""}]
        messages[1]["content"] = random.choice(QUESTIONS)
        self._stream("chat", "/v1/chat/completions", {"messages": messages})

    @task(3)
    def session_turn(self) -> None:
        if self.session is None:
            r = self.client.post(
                "/v1/sessions",
                json={"system_prompt": SYSTEM},
                headers=self.headers,
                name="session create",
            )
            RECORD.statuses["session create"].append(r.status_code)
            if r.status_code != 201:
                return
            self.session, self.turns = r.json()["id"], 0
            RECORD.sessions[self.session] = (self.key, 0)
        path = f"/v1/sessions/{self.session}/messages"
        if self._stream("session", path, {"content": random.choice(QUESTIONS)}):
            self.turns += 1
            RECORD.sessions[self.session] = (self.key, self.turns)

    @task(2)
    def image(self) -> None:
        if not CONFIG["images"]:
            return
        parts = [
            {"type": "image_url", "image_url": {"url": tiny_png(random.randrange(8))}},
            {"type": "text", "text": "What is in the picture?"},
        ]
        self._stream(
            "image", "/v1/chat/completions", {"messages": [{"role": "user", "content": parts}]}
        )

    @task(2)
    def document(self) -> None:
        question = random.choice(DOC_QUESTIONS)
        messages = [
            {"role": "system", "content": "Answer from this document only.\n\n" + DOCUMENT},
            {"role": "user", "content": question},
        ]
        self._stream("document", "/v1/chat/completions", {"messages": messages})


def make_keys(data_dir: str, n: int) -> list[str]:
    return [make_key(data_dir, f"tenant{i}") for i in range(n)]


def check_sessions(base_url: str) -> tuple[int, int]:
    """(sessions checked, turns missing): each completed turn's user message and reply must
    be stored, complete."""
    missing = 0
    for sid, (key, turns) in RECORD.sessions.items():
        r = httpx.get(f"{base_url}/v1/sessions/{sid}", headers={"Authorization": f"Bearer {key}"})
        messages = r.json()["messages"] if r.status_code == 200 else []
        replies = [m for m in messages if m["role"] == "assistant" and m["status"] == "complete"]
        users = [m for m in messages if m["role"] == "user"]
        missing += max(0, turns - len(replies)) + max(0, turns - len(users))
    return len(RECORD.sessions), missing


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def table(duration: float, users: int, checked: int, missing: int) -> str:
    rows = [
        "| kind | requests | 2xx | 5xx | 503 (Retry-After) | other 4xx | TTFT p50 s | TTFT p95 s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total_5xx = 0
    for kind in sorted(RECORD.statuses):
        st = RECORD.statuses[kind]
        n5 = sum(1 for s in st if s >= 500 and s != 503)
        total_5xx += n5
        ok = sum(1 for s in st if 200 <= s < 300)
        n503 = sum(1 for s in st if s == 503)
        other = len(st) - ok - n5 - n503
        t = RECORD.ttft.get(kind, [])
        p50 = f"{pct(t, 50):.2f}" if t else "-"
        p95 = f"{pct(t, 95):.2f}" if t else "-"
        rows.append(f"| {kind} | {len(st)} | {ok} | {n5} | {n503} | {other} | {p50} | {p95} |")
    head = (
        f"{users} users, {duration:.0f} s, 4 slots; 5xx (not 503): {total_5xx}; 503 without "
        f"Retry-After: {RECORD.retry_after_missing}; sessions checked: {checked}, stored turns "
        f"missing: {missing}"
    )
    return head + "\n\n" + "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load", allow_abbrev=False)
    p.add_argument("--users", type=int, default=32)
    p.add_argument("--duration", type=float, default=180.0, help="seconds of load")
    p.add_argument("--max-tokens", type=int, default=12)
    p.add_argument("--no-images", action="store_true", help="skip the image questions")
    p.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    args = p.parse_args(argv)

    CONFIG["max_tokens"] = args.max_tokens
    CONFIG["images"] = not args.no_images
    data_dir = tempfile.mkdtemp(prefix="kvchat-load-")
    CONFIG["keys"] = make_keys(data_dir, 4)
    server_args = ["-np", "4", "-c", "8192", "--data-dir", data_dir]
    if CONFIG["images"]:
        from bench.__main__ import tiny_mmproj

        server_args += ["--mmproj", tiny_mmproj()]
    try:
        with ServerProcess(*server_args) as server:  # 127.0.0.1 only
            return_code = _run(server, args)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return return_code


def _run(server: ServerProcess, args: argparse.Namespace) -> int:
    """Run the users for the duration (then locust stops them), check the sessions, report."""
    ChatUser.host = server.base_url
    env = Environment(user_classes=[ChatUser])
    runner = env.create_local_runner()
    runner.start(args.users, spawn_rate=args.users)
    gevent.spawn_later(args.duration, runner.quit)
    started = time.monotonic()
    runner.greenlet.join()
    elapsed = time.monotonic() - started
    checked, missing = check_sessions(server.base_url)
    out = table(elapsed, args.users, checked, missing)
    print(out)
    if not args.no_write:
        RESULTS.write_text(f"# Load test ({time.strftime('%Y-%m-%d')})\n\n{out}\n")
    n5 = sum(1 for st in RECORD.statuses.values() for s in st if s >= 500 and s != 503)
    return 1 if n5 or missing or RECORD.retry_after_missing else 0


if __name__ == "__main__":
    sys.exit(main())
