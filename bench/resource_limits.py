"""`python -m bench.resource_limits`: what one costly request takes from a server, for each kind.

    python -m bench.resource_limits [--only NAME,...] [--small]

A server with the tiny test projector and two API keys; for each request of
bench/workloads/hostile_requests.py (at the sizes of an attack, or the tests' with `--small`):
the request's status and seconds, the growth of the server's resident memory (its peak
`VmHWM` from /proc/<pid>/status, reset before each request through `clear_refs`, against the
`VmRSS` before), and whether a chat sent at the same moment on the other key was answered, in
how many seconds. The server's own health is checked after each. Prints one row per request.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.lib.server_process import ROOT, ServerProcess, make_key
from bench.workloads import hostile_requests as hostile

TIMEOUT = 600.0


@dataclass(slots=True)
class Row:
    name: str
    status: int | str
    seconds: float
    rss_growth_mb: float
    other_status: int | str
    other_seconds: float
    alive: bool


def kinds(small: bool) -> dict[str, Callable[[], hostile.Hostile]]:
    s = small
    return {
        "schema maxLength": lambda: hostile.huge_max_length(200_000 if s else 3_000_000_000),
        "tool minItems": lambda: hostile.huge_min_items_tool(1_000_000),
        "pattern a{n}": lambda: hostile.huge_pattern(1_000_000),
        "grammar nested": lambda: hostile.deep_grammar(49_000),
        "grammar fan-out": lambda: hostile.fan_out_grammar(24),
        "grammar left recursion": hostile.left_recursive_grammar,
        "images": lambda: hostile.many_images(17 if s else 1000),
        "prompts": lambda: hostile.many_prompts(20_000 if s else 1_000_000),
        "docx zip bomb": lambda: hostile.zip_bomb_docx((256 << 20) if s else (10 << 30)),
        "pdf pages": lambda: hostile.many_pages_pdf(2001 if s else 20_000),
        "tokenize with pieces": lambda: hostile.big_tokenize((2 << 20) if s else (12 << 20)),
        "logit_bias list": lambda: hostile.long_bias_list(300_000 if s else 1_000_000),
        "logit_bias text": lambda: hostile.long_bias_text((1 << 20) if s else (8 << 20)),
    }


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def post(url: str, attack: hostile.Hostile, key: str) -> tuple[int | str, float]:
    headers = {"Authorization": f"Bearer {key}"}
    t0 = time.perf_counter()
    try:
        if attack.file is not None:
            r = httpx.post(url, files={"file": attack.file}, headers=headers, timeout=TIMEOUT)
        else:
            r = httpx.post(url, json=attack.json, headers=headers, timeout=TIMEOUT)
        status: int | str = r.status_code
    except httpx.HTTPError as e:
        status = type(e).__name__
    return status, time.perf_counter() - t0


def run_one(srv: ServerProcess, keys: dict[str, str], name: str, attack: hostile.Hostile) -> Row:
    assert srv.proc is not None
    pid = srv.proc.pid
    if "{collection}" in attack.path:
        r = httpx.post(
            srv.base_url + "/v1/collections",
            json={"name": name},
            headers={"Authorization": f"Bearer {keys['mallory']}"},
        )
        attack.extra["collection"] = r.json()["id"]
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    before = memory_kib(pid, "VmRSS")
    url = srv.base_url + attack.path.format(**attack.extra)
    chat = hostile.Hostile("/v1/chat/completions", hostile.chat())
    with ThreadPoolExecutor(2) as pool:
        mallory = pool.submit(post, url, attack, keys["mallory"])
        time.sleep(0.05)  # the attack first: the chat arrives while it is being read or run
        alice = pool.submit(post, srv.base_url + chat.path, chat, keys["alice"])
        (status, seconds), (other, other_s) = mallory.result(), alice.result()
    try:
        alive = httpx.get(srv.base_url + "/health", timeout=30).status_code == 200
        growth = (memory_kib(pid, "VmHWM") - before) / 1024
    except (httpx.HTTPError, FileNotFoundError, KeyError):
        alive, growth = False, float("nan")
    return Row(name, status, seconds, growth, other, other_s, alive)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--small", action="store_true", help="the tests' sizes")
    args = parser.parse_args()
    chosen = kinds(args.small)
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
    with tempfile.TemporaryDirectory(prefix="kvchat-limits-") as tmp:
        data = Path(tmp)
        mmproj = str(data / "tiny-mmproj.gguf")
        script = ROOT / "scripts" / "make_tiny_mmproj.py"
        subprocess.run([sys.executable, str(script), mmproj], check=True, capture_output=True)
        keys = {"mallory": make_key(data, "mallory"), "alice": make_key(data, "alice")}
        server_args = ("-np", "2", "-c", "8192", "--data-dir", str(data), "--mmproj", mmproj)
        server_args += ("--image-max-pixels", "262144", "--doc-prefill-tokens", "0")
        print(f"{'request':24} {'status':>8} {'s':>7} {'RSS+ MB':>8} {'chat':>6} {'chat s':>7}")
        for name, build in chosen.items():
            attack = build()
            # A server of its own per request: one that died or hangs affects no other row.
            with ServerProcess(*server_args) as srv:
                httpx.post(
                    srv.base_url + "/v1/chat/completions",
                    json=hostile.chat(),
                    headers={"Authorization": f"Bearer {keys['alice']}"},
                    timeout=TIMEOUT,
                )
                row = run_one(srv, keys, name, attack)
            flag = "" if row.alive else "  (server gone)"
            print(
                f"{row.name:24} {row.status!s:>8} {row.seconds:7.2f} {row.rss_growth_mb:8.1f}"
                f" {row.other_status!s:>6} {row.other_seconds:7.2f}{flag}",
                flush=True,
            )


if __name__ == "__main__":
    main()
