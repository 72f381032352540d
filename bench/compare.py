"""`python -m bench.compare`: the prefix-reuse scenarios on ours, llama-server and llama-cpp-python.

    python -m bench.compare [--quick] [--servers ours,llama-server,llama-cpp-python]
                            [--mmproj PATH|tiny] [--out DIR] [--no-readme]

Each server is started on its own (bench/peers.py: same model file, 2 threads, 8192 context, 4
slots), warmed up with one short request, driven through every scenario in bench/core.py, and
stopped before the next one starts. Cold references are the same prompt with a unique nonce at
the very start (`core.fresh_prefix`), measured right after the warm request: no server can reuse
any of it, and it needs nothing but the OpenAI API. Every scenario makes fresh random documents,
so no server starts warm.

Writes DIR/compare.md (tables), DIR/compare.png (chart) and DIR/compare.json (raw numbers);
--quick (small prompts, short generations: a smoke test) writes compare-quick.* instead. A full
run also puts the tables into README.md between the `compare:start`/`compare:end` markers.
llama-server runs when build/llama-server/bin/llama-server exists (`make llama-server`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import core, images, peers
from bench.client import stream_chat
from bench.core import Row
from tests.server import ROOT

RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
README_START = "<!-- compare:start -->"
README_END = "<!-- compare:end -->"


@dataclass(frozen=True)
class Plan:
    long: int  # paragraphs (~65 tokens each) of the ~1,000-token prompts
    system: int  # paragraphs of the ~1,200-token shared system prompt
    chat: int  # paragraphs of the 4-turn chat's document
    session: int  # paragraphs of each of the 8 sessions' documents
    sessions: int
    clients: int  # concurrent clients of the throughput scenario
    client_tokens: int  # tokens each client generates


FULL = Plan(long=16, system=18, chat=6, session=4, sessions=8, clients=8, client_tokens=64)
QUICK = Plan(long=4, system=5, chat=2, session=1, sessions=8, clients=8, client_tokens=16)

Scenario = Callable[[str, core.Cold], list[Row]]

# The scenario whose target is "well under llama-server's" (it recomputes the shared prompt on
# every other slot), and how far under counts as well under.
AT_ONCE = "shared system, 4 users at once"
WELL_UNDER = 0.5


def scenarios(plan: Plan, with_images: bool) -> list[tuple[str, Scenario]]:
    out: list[tuple[str, Scenario]] = [
        ("same long prompt twice", lambda u, c: core.same_prompt_twice(u, c, plan.long)),
        ("growing prefix, rounds 1-3", lambda u, c: core.growing_prefix(u, c, plan.long)),
        ("4-turn chat, turns 2-4", lambda u, c: core.four_turn_chat(u, c, plan.chat)),
        (
            "shared system, 4 users in turn",
            lambda u, c: core.shared_system_in_turn(u, c, plan.system),
        ),
        (AT_ONCE, lambda u, c: core.four_users_at_once(u, True, c, plan.system)),
        (
            "4 users at once, nothing cached",
            lambda u, c: core.four_users_at_once(u, False, c, plan.system),
        ),
        (
            f"{plan.sessions} sessions x 3 turns, turns 2-3",
            lambda u, c: core.eight_sessions_three_turns(u, c, plan.session, plan.sessions),
        ),
    ]
    if with_images:
        out.append(("image re-ask, questions 2-3", lambda u, c: images.image_reask(u, c)))
    return out


def eog_logit_bias(model: str) -> dict[str, float]:
    """-100 on every end-of-generation token: how a server without `ignore_eos` (llama-cpp-python)
    is made to generate all the requested tokens."""
    import llama_cpp

    with _quiet_stderr():
        llm = llama_cpp.Llama(model, vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n = llama_cpp.llama_vocab_n_tokens(vocab)
        ids = [i for i in range(n) if llama_cpp.llama_vocab_is_eog(vocab, i)]
        llm.close()
    return {str(i): -100.0 for i in ids}


class _quiet_stderr:
    """Silence llama.cpp's C-level log lines (fd 2) while loading the vocabulary."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self._saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)


def summarize(rows: list[Row]) -> dict:
    """One scenario's rows as one line: means over its warm requests and their cold references."""
    n = len(rows)
    warm = sum(w.ttft for _, w, _ in rows) / n
    cold = sum(c.ttft for _, _, c in rows) / n
    prompts = [w.prompt_tokens for _, w, _ in rows]
    cached = [w.cached_tokens for _, w, _ in rows]
    return {
        "warm_ttft": warm,
        "cold_ttft": cold,
        "ratio": warm / cold,
        "warm_total": sum(w.total for _, w, _ in rows) / n,
        "prompt_tokens": None if None in prompts else sum(prompts) / n,  # type: ignore[arg-type]
        "cached_tokens": None if None in cached else sum(cached) / n,  # type: ignore[arg-type]
    }


def run_server(peer: peers.Peer, plan: Plan, bias: dict[str, float]) -> dict:
    out: dict = {
        "command": peer.command,
        "notes": peer.notes,
        "log": str(peer.log_path.relative_to(ROOT)),
        "scenarios": {},
        "rows": [],
        "throughput": {},
        "errors": {},
    }
    print(f"\n== {peer.name}: starting ({' '.join(peer.command[:3])} ...)", flush=True)
    with peer:
        stream_chat(peer.base_url, [{"role": "user", "content": "Hello"}], max_tokens=2)
        print(
            f"{'scenario':44} {'prompt':>6} {'cached':>6} {'cold s':>8} {'warm s':>8} "
            f"{'warm/cold':>9}",
            flush=True,
        )
        for group, scenario in scenarios(plan, peer.images):
            try:
                rows = scenario(peer.base_url, core.fresh_prefix)
            except Exception as e:  # one failing scenario must not lose the others
                out["errors"][group] = f"{type(e).__name__}: {e}"
                print(f"{group:44} FAILED: {e}", flush=True)
                traceback.print_exc()
                continue
            for name, warm, cold in rows:
                out["rows"].append(
                    {
                        "scenario": group,
                        "name": name,
                        "warm": warm.as_dict(),
                        "cold": cold.as_dict(),
                    }
                )
                print(
                    f"{name:44} {_tokens(warm.prompt_tokens):>6} {_tokens(warm.cached_tokens):>6} "
                    f"{cold.ttft:8.3f} {warm.ttft:8.3f} {warm.ttft / cold.ttft:9.3f}",
                    flush=True,
                )
            out["scenarios"][group] = summarize(rows)
        for clients in (1, plan.clients):
            key = throughput_name(clients, plan.client_tokens)
            try:
                rate, results = core.decode_throughput(
                    peer.base_url, clients, plan.client_tokens, logit_bias=bias
                )
            except Exception as e:
                out["errors"][key] = f"{type(e).__name__}: {e}"
                print(f"{key}: FAILED: {e}", flush=True)
                continue
            out["throughput"][key] = {
                "tokens_per_s": rate,
                "results": [r.as_dict() for r in results],
            }
            print(f"aggregate decode, {key}: {rate:.1f} tok/s", flush=True)
    return out


def throughput_name(clients: int, tokens: int) -> str:
    return f"{clients} client{'s' if clients > 1 else ''} x {tokens} tokens"


def _tokens(n: float | None) -> str:
    return "n/a" if n is None else f"{n:.0f}"


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    mem_gib = None
    try:
        info = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
        cpu = found.group(1).strip() if found else cpu
        mem = re.search(r"^MemTotal:\s*(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
        mem_gib = round(int(mem.group(1)) / 2**20) if mem else None
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": mem_gib}


def versions() -> dict:
    from importlib.metadata import version

    try:
        rev = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rev = "unknown"
    return {
        "ours": f"kvchat {rev}",
        "llama-server": f"llama-server {peers.llama_server_version() or '(not built)'}",
        "llama-cpp-python": f"llama-cpp-python {version('llama-cpp-python')} server",
    }


# --- report -------------------------------------------------------------------------------------


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _cached(s: dict) -> str:
    if s.get("cached_tokens") is None or s.get("prompt_tokens") is None:
        return "n/a"
    return f"{s['cached_tokens']:.0f}/{s['prompt_tokens']:.0f}"


def targets(report: dict) -> list[tuple[str, float | None, str, str]]:
    """(target, ours/llama-server, bound, verdict) rows: the issue's targets as ratios."""
    servers = report["servers"]
    if "ours" not in servers or "llama-server" not in servers:
        return []
    ours, peer = servers["ours"], servers["llama-server"]
    rows = []
    for group in report["scenario_names"]:
        a, b = ours["scenarios"].get(group), peer["scenarios"].get(group)
        ratio = a["warm_ttft"] / b["warm_ttft"] if a and b else None
        bound, ok = (f"≤ {WELL_UNDER}", WELL_UNDER) if group == AT_ONCE else ("≤ 1", 1.0)
        verdict = "–" if ratio is None else ("met" if ratio <= ok else "not met")
        rows.append((f"warm TTFT: {group}", ratio, bound, verdict))
    key = report["throughput_names"][-1]
    a, b = ours["throughput"].get(key), peer["throughput"].get(key)
    ratio = a["tokens_per_s"] / b["tokens_per_s"] if a and b else None
    verdict = "–" if ratio is None else ("met" if ratio >= 1 else "not met")
    rows.append((f"aggregate tok/s: {key}", ratio, "≥ 1", verdict))
    return rows


def markdown(report: dict) -> str:
    names = list(report["servers"])
    m = report["machine"]
    quick = " (--quick: small prompts, a smoke test)" if report["quick"] else ""
    head = [
        f"Run {report['date']}{quick}"
        f" on {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB; model `{report['model']}`; "
        f"every server: {peers.THREADS} threads, {peers.CTX_SIZE} context, {peers.SLOTS} slots "
        "where it has slots. Servers: "
        + "; ".join(report["versions"][n] + _note(report, n) for n in names)
        + ".",
        *[f"\n{n} failed to run: {e}" for n, e in report["failed"].items()],
        "",
        "Cold = the same prompt with a unique nonce (~9 tokens) at the very start (nothing "
        "reusable), sent right after the warm request. warm/cold = mean TTFT ratio over the "
        "scenario's warm requests (lower is better); warm s = mean warm TTFT in seconds; "
        "cached = cached/prompt tokens of the warm requests as the server reports them (n/a: "
        "not reported).",
        "",
    ]
    cols = "".join(f" {n} warm/cold | {n} warm s | {n} cached |" for n in names)
    lines = [f"| scenario |{cols}", "|---|" + "---:|---:|---:|" * len(names)]
    for group in report["scenario_names"]:
        cells = ""
        for n in names:
            s = report["servers"][n]["scenarios"].get(group)
            if s is None:
                err = "error" if group in report["servers"][n]["errors"] else "skipped"
                cells += f" {err} | | |"
            else:
                cells += f" {_f(s['ratio'])} | {_f(s['warm_ttft'])} | {_cached(s)} |"
        lines.append(f"| {group} |{cells}")
    lines += ["", "| aggregate decode tok/s |" + "".join(f" {n} |" for n in names)]
    lines.append("|---|" + "---:|" * len(names))
    for key in report["throughput_names"]:
        cells = ""
        for n in names:
            t = report["servers"][n]["throughput"].get(key)
            cells += f" {_f(t['tokens_per_s'], 1) if t else 'error'} |"
        lines.append(f"| {key} |{cells}")
    goals = targets(report)
    lines += ["", "Targets, ours / llama-server:", ""]
    if goals:
        lines += ["| target | ours / llama-server | bound | |", "|---|---:|---|---|"]
        lines += [f"| {t} | {_f(r, 2)} | {b} | {v} |" for t, r, b, v in goals]
    else:
        lines.append("(not evaluated: llama-server or ours did not run)")
    return "\n".join(head + lines) + "\n"


def _note(report: dict, name: str) -> str:
    note = report["servers"][name].get("notes")
    return f" ({note})" if note else ""


def chart(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["servers"])
    groups = report["scenario_names"]
    fig, (ax, tp) = plt.subplots(
        1, 2, figsize=(14, 6), gridspec_kw={"width_ratios": [4, 1]}, layout="constrained"
    )
    width = 0.8 / max(len(names), 1)
    for i, n in enumerate(names):
        ratios = [
            report["servers"][n]["scenarios"].get(g, {}).get("ratio", float("nan")) for g in groups
        ]
        ax.bar([x + i * width for x in range(len(groups))], ratios, width, label=n)
        rates = [
            report["servers"][n]["throughput"].get(k, {}).get("tokens_per_s", float("nan"))
            for k in report["throughput_names"]
        ]
        tp.bar([x + i * width for x in range(len(rates))], rates, width, label=n)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    ax.set_ylabel("warm / cold TTFT (log scale, lower is better)")
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(groups))])
    ax.set_xticklabels(groups, rotation=30, ha="right", fontsize=8)
    ax.legend()
    m = report["machine"]
    ax.set_title(
        f"{report['model']} · {m['cpu']}, {m['cores']} cores · {report['date']}"
        + (" · quick" if report["quick"] else ""),
        fontsize=9,
    )
    tp.set_ylabel("aggregate decode tokens/s (higher is better)")
    keys = report["throughput_names"]
    tp.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(keys))])
    tp.set_xticklabels(keys, rotation=30, ha="right", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def update_readme(table: str, readme: Path = README) -> bool:
    text = readme.read_text()
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        return False
    body = f"{README_START}\n{table}{README_END}"
    readme.write_text(text[:start] + body + text[end + len(README_END) :])
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small prompts and short generations")
    p.add_argument(
        "--servers", default=",".join(peers.NAMES), help="comma-separated, run in this order"
    )
    p.add_argument(
        "--mmproj",
        help="projector for the servers that take one (ours, llama-server): the image scenario "
        "runs on them; 'tiny' builds the tiny test projector (random weights)",
    )
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--no-readme", action="store_true", help="leave README.md as it is")
    p.add_argument("--doc-qa", action="store_true", help="add the document-QA rows (bench.doc_qa)")
    args = p.parse_args(argv)

    from app.config import packaged_model_path

    model = packaged_model_path()
    mmproj = args.mmproj
    if mmproj == "tiny":
        from bench.__main__ import tiny_mmproj

        mmproj = tiny_mmproj()
    plan = QUICK if args.quick else FULL
    wanted = [s.strip() for s in args.servers.split(",") if s.strip()]
    explicit = args.servers != p.get_default("servers")
    chosen: list[peers.Peer] = []
    for name in wanted:
        try:
            chosen.append(peers.make(name, model, mmproj))
        except peers.PeerUnavailable as e:
            if explicit:
                p.error(f"{name}: {e}")
            print(f"skipping {name}: {e}", flush=True)
    bias = eog_logit_bias(model)
    report: dict = {
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "plan": plan.__dict__,
        "model": Path(model).name,
        "machine": machine(),
        "versions": versions(),
        "scenario_names": [name for name, _ in scenarios(plan, bool(mmproj))],
        "throughput_names": [throughput_name(c, plan.client_tokens) for c in (1, plan.clients)],
        "servers": {},
        "failed": {},
    }
    for peer in chosen:
        try:
            report["servers"][peer.name] = run_server(peer, plan, bias)
        except Exception as e:
            if peer.name == "llama-server" and peer.images:
                # The projector may not load in llama-server: run it without images.
                print(f"llama-server did not start with --mmproj ({e}); again without")
                peer = peers.llama_server(model)
                try:
                    report["servers"][peer.name] = run_server(peer, plan, bias)
                    continue
                except Exception as again:
                    e = again
            report["failed"][peer.name] = f"{type(e).__name__}: {e}"
            print(f"{peer.name} failed: {e} (log: {peer.log_path})", flush=True)
    if not any(s["scenarios"] for s in report["servers"].values()):
        print("no scenario ran", file=sys.stderr)
        return 1

    args.out.mkdir(parents=True, exist_ok=True)
    stem = "compare-quick" if args.quick else "compare"
    table = markdown(report)
    if args.doc_qa:
        from bench import doc_qa

        report["doc_qa"] = doc_qa.run(model, args.quick, wanted)
        table += "\n" + doc_qa.markdown(report["doc_qa"])
    md = args.out / f"{stem}.md"
    md.write_text(f"# Prefix reuse: {', '.join(report['servers'])}\n\n{table}")
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    chart(report, args.out / f"{stem}.png")
    print("\n" + table)
    print(f"wrote {md}, {args.out / (stem + '.png')}, {args.out / (stem + '.json')}")
    chart_link = f"\n![warm/cold TTFT per scenario](bench/results/{stem}.png)\n"
    if (
        args.out == RESULTS
        and not args.quick
        and not args.no_readme
        and update_readme(table + chart_link)
    ):
        print(f"updated the table in {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
