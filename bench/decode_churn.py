"""`python -m bench.decode_churn`: single-stream decode and session churn, ours beside llama-server.

    python -m bench.decode_churn [--quick] [--servers ours,llama-server] [--out DIR]

Every server runs with 2 slots and 2 threads (`-np 2 -t 2 -c 8192`) on the same model file; the
bare decode loop (bench/decode_limit.py) is measured first, in its own process, as the limit of
this machine. The servers are up together for the single-stream rows, which take turns between
them (see `alternating`), and each churns alone while the other is idle.

- single-stream decode: one request at a time, N tokens with end-of-generation ignored, streamed
  (tokens after the first / time after the first) and not streamed (the server's own
  `timings.predicted_per_second` where it reports one, else tokens / whole request time), the
  median of 5 rounds;
- session churn: one stream decodes throughout on one slot while S chat conversations of ~1.3k
  tokens take turns on the other: every turn after the first of each conversation finds its slot
  taken by another conversation and gets its history back from host memory. Reported: mean TTFT
  of those swapping turns, and the decoding stream's p95 and max gap between tokens during them
  (the first, cold round of prefills is left out of both).

Writes DIR/decode_churn.json and .md; prints the table with ours/llama-server ratios and the
targets (decode >= 0.95x, churn TTFT and p95 gap <= 1.1x). `python -m bench.compare` runs the
same `run()` after its prefix-reuse rows (`--no-decode-churn` skips it), so one run of it holds
every row; this entry point is for these rows alone, e.g. while working on decode speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import decode_limit
from bench.lib import core, peers
from bench.lib.client import stream_chat
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, failed_lines, ratio_table, table_lines, target

SLOTS = 2
NAMES = ("ours", "llama-server")  # llama-cpp-python has no slots to churn


@dataclass(frozen=True)
class Plan:
    decode_tokens: int  # per single-stream request
    decode_rounds: int  # single-stream requests per server and mode (the median counts)
    sessions: int  # conversations taking turns on the free slot
    paragraphs: int  # of each conversation's document (~65 tokens each)
    turns: int  # per conversation (the first is cold)


FULL = Plan(decode_tokens=400, decode_rounds=5, sessions=6, paragraphs=20, turns=3)
QUICK = Plan(decode_tokens=48, decode_rounds=1, sessions=3, paragraphs=2, turns=2)

# (row, group, key, bound of ours / llama-server or None, lower is better): the table's rows.
SPEC: list[tuple[str, str, str, float | None, bool]] = [
    ("single-stream decode, streamed tok/s", "decode", "streamed_tok_s", 0.95, False),
    ("single-stream decode, whole tok/s", "decode", "whole_tok_s", 0.95, False),
    ("churn: swapping turns' mean TTFT s", "churn", "warm_ttft_s", 1.1, True),
    ("churn: decoding stream's p95 gap s", "churn", "gap_p95_s", 1.1, True),
    ("churn: decoding stream's max gap s", "churn", "gap_max_s", None, True),
]


def single_stream(base_url: str, n_tokens: int, bias: dict) -> dict:
    """Tokens per second of one request, streamed and then not."""
    extra = {"ignore_eos": True, "logit_bias": bias}
    messages = [{"role": "user", "content": f"Tell a long story ({core.nonce()})."}]
    r = stream_chat(base_url, messages, max_tokens=n_tokens, **extra)
    streamed = (r.completion_tokens - 1) / max(r.total - r.ttft, 1e-9)
    body = {"messages": messages, "max_tokens": n_tokens, "stream": False, **extra}
    messages[0]["content"] = f"Tell another long story ({core.nonce()})."
    t0 = time.perf_counter()
    reply = httpx.post(base_url + "/v1/chat/completions", json=body, timeout=600).json()
    elapsed = time.perf_counter() - t0
    timings = reply.get("timings") or {}
    whole = timings.get("predicted_per_second") or reply["usage"]["completion_tokens"] / elapsed
    return {"streamed_tok_s": streamed, "whole_tok_s": whole}


def alternating(started: dict[str, peers.Peer], plan: Plan, bias: dict) -> dict[str, dict]:
    """Single-stream decode of every started server, taking turns request by request.

    The speed of this machine drifts by 10% and more over minutes (other tenants of the host):
    measuring one server after the other would compare two different machines. Every server is
    up (an idle one computes nothing) and the rounds alternate between them, so a drift hits
    all alike; each figure is the median of the rounds."""
    runs: dict[str, list[dict]] = {name: [] for name in started}
    for _ in range(plan.decode_rounds):
        for name, peer in started.items():
            runs[name].append(single_stream(peer.base_url, plan.decode_tokens, bias))
    return {
        name: {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        for name, rounds in runs.items()
    }


class _Decoder(threading.Thread):
    """One stream that decodes until told to stop, recording when each token came."""

    def __init__(self, base_url: str, bias: dict) -> None:
        super().__init__(daemon=True)
        self.base_url, self.bias = base_url, bias
        self.stamps: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = {
            "messages": [{"role": "user", "content": f"Write forever ({core.nonce()})."}],
            "max_tokens": 7000,
            "stream": True,
            "ignore_eos": True,
            "logit_bias": self.bias,
        }
        with httpx.stream(
            "POST", self.base_url + "/v1/chat/completions", json=body, timeout=600
        ) as r:
            for line in r.iter_lines():
                if self.stop.is_set():
                    return  # closing the connection cancels the request
                if line.startswith("data: ") and '"content"' in line:
                    self.stamps.append(time.perf_counter())


def churn(base_url: str, plan: Plan, bias: dict) -> dict:
    """S conversations taking turns on one free slot while another stream decodes."""
    decoder = _Decoder(base_url, bias)
    decoder.start()
    while len(decoder.stamps) < 5:  # the stream holds its slot before the churn starts
        time.sleep(0.05)
    chats = [
        [{"role": "system", "content": core.long_document(plan.paragraphs)}]
        for _ in range(plan.sessions)
    ]
    warm: list[float] = []
    t_start = 0.0  # the gaps count from the first swapping turn on (the cold round prefills)
    for turn in range(plan.turns):
        if turn == 1:
            t_start = time.perf_counter()
        for chat in chats:
            chat.append({"role": "user", "content": f"Question {turn}: what comes next?"})
            r = stream_chat(base_url, chat, max_tokens=8, logit_bias=bias)
            chat.append({"role": "assistant", "content": r.text})
            if turn > 0:
                warm.append(r.ttft)
    t_end = time.perf_counter()
    decoder.stop.set()
    decoder.join(timeout=60)
    stamps = [t for t in decoder.stamps if t_start <= t <= t_end]
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:], strict=False))
    p95 = gaps[min(len(gaps) - 1, int(0.95 * len(gaps)))] if gaps else float("nan")
    return {
        "warm_ttft_s": statistics.mean(warm),
        "gap_p95_s": p95,
        "gap_max_s": gaps[-1] if gaps else float("nan"),
        "swaps": len(warm),
    }


def run(model: str, quick: bool, servers: list[str], bias: dict | None = None) -> dict:
    """The bare loop, then every server of `servers` that is ours or llama-server: all of them
    up at once for the single-stream rows (alternating), then the churn of each alone (the other
    server idle). What fails is recorded under "failed" and the rest goes on, so `bench.compare`
    keeps its other rows."""
    plan = QUICK if quick else FULL
    bias = peers.eog_logit_bias(model) if bias is None else bias
    report: dict = {"plan": plan.__dict__, "bare_loop": None, "servers": {}, "failed": {}}
    print(f"\n== decode and churn, {SLOTS} slots per server", flush=True)
    try:
        report["bare_loop"] = decode_limit.measure(model, plan.decode_tokens)
        print(f"bare loop: {report['bare_loop']}", flush=True)
    except Exception as e:
        report["failed"]["bare loop"] = f"{type(e).__name__}: {e}"
        print(f"bare loop: {report['failed']['bare loop']}", flush=True)
    started: dict[str, peers.Peer] = {}

    def failed(name: str, e: Exception) -> None:
        # Not built, or it failed: the other server's rows still count.
        report["failed"][name] = f"{type(e).__name__}: {e}"
        print(f"{name}: {report['failed'][name]}", flush=True)
        if name in started:
            started.pop(name).stop()

    try:
        for name in [s for s in servers if s in NAMES]:
            try:
                peer = peers.make(name, model, slots=SLOTS).start()
                started[name] = peer
                stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
            except Exception as e:
                failed(name, e)
        try:
            decode = alternating(started, plan, bias)
        except Exception as e:
            for name in list(started):
                failed(name, e)
            decode = {}
        for name, peer in list(started.items()):
            print(f"{name}: decode {decode[name]}", flush=True)
            try:
                swap = churn(peer.base_url, plan, bias)
            except Exception as e:
                failed(name, e)
                continue
            print(f"{name}: churn {swap}", flush=True)
            report["servers"][name] = {"decode": decode[name], "churn": swap}
    finally:
        for peer in started.values():
            peer.stop()
    return report


def _pair(rows: dict, group: str, key: str) -> tuple[float | None, float | None]:
    """(ours, llama-server) of one row; None for a server that did not run."""
    ours, peer = rows.get("ours"), rows.get("llama-server")
    return (ours[group][key] if ours else None, peer[group][key] if peer else None)


def targets(report: dict) -> list[Target]:
    """The rows of SPEC with a bound, once both servers ran: a ratio needs both sides."""
    rows = report["servers"]
    if "ours" not in rows or "llama-server" not in rows:
        return []
    return [
        target(label, *_pair(rows, group, key), bound, at_most=at_most)
        for label, group, key, bound, at_most in SPEC
        if bound is not None
    ]


def markdown(report: dict) -> str:
    rows = report["servers"]
    names = list(rows)
    bare = report["bare_loop"]
    loop = "failed" if bare is None else f"{bare['tokens_per_s']:.1f} tok/s"
    lines = [
        f"Single-stream decode and session churn, every server -np {SLOTS} -t 2 -c 8192; bare "
        f"decode loop (one thread, no server): {loop}.",
        "",
    ]
    table = [
        (label, [rows[n][group][key] for n in names], *_pair(rows, group, key))
        for label, group, key, _, _ in SPEC
    ]
    lines += ratio_table(names, table) + failed_lines(report)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.decode_churn", allow_abbrev=False)
    p.add_argument("--quick", action="store_true", help="small prompts, few tokens (smoke test)")
    p.add_argument("--servers", default=",".join(NAMES))
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    report = run(packaged_model_path(), args.quick, servers)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "decode_churn-quick" if args.quick else "decode_churn"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2))
    table = markdown(report) + "\n" + "\n".join(table_lines(targets(report))) + "\n"
    (out / f"{stem}.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
