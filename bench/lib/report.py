"""bench.compare's report: the markdown tables, the chart, and the two places a full run writes
them: every table into docs/benchmarks.md, a short headline table into README.md (each between
the `compare:start`/`compare:end` markers of its file).

One report holds every part of a run (bench.workloads.prefix's scenarios and aggregate decode,
bench.decode_churn's rows, bench.doc_qa's rows) and ends with one Targets table that lists the
targets of all of them, so the verdicts of a run are read in one place. A part that was skipped
or failed leaves its section out (a failure is named at the top). The headline has one row per
target, with both servers' values beside the ratio.
"""

from __future__ import annotations

from pathlib import Path

from bench import background, decode_churn, ingest, long_doc_qa, speculation
from bench.lib import cluster_report, doc_qa_report, peers
from bench.lib.server_process import ROOT
from bench.lib.targets import Target, table_lines
from bench.workloads import prefix

README = ROOT / "README.md"
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
START = "<!-- compare:start -->"
END = "<!-- compare:end -->"


def targets(report: dict) -> list[Target]:
    """Every target of the run, part by part, for the parts that ran."""
    rows = prefix.targets(report)
    if report.get("decode_churn"):
        rows += decode_churn.targets(report["decode_churn"])
    if report.get("doc_qa"):
        rows += doc_qa_report.targets(report["doc_qa"])
    if report.get("long_doc_qa"):
        rows += long_doc_qa.targets(report["long_doc_qa"])
    if report.get("background"):
        rows += background.targets(report["background"])
    if report.get("ingest"):
        rows += ingest.targets(report["ingest"])
    if report.get("speculation"):
        rows += speculation.targets(report["speculation"])
    if report.get("cluster"):
        rows += cluster_report.targets(report["cluster"])
    return rows


def markdown(report: dict) -> str:
    names = list(report["servers"])
    m = report["machine"]
    quick = " (--quick: small prompts, a smoke test)" if report["quick"] else ""
    head = [
        f"Run {report['date']}{quick}"
        f" on {_where(m)}, {m['mem_gib']} GiB; model `{report['model']}`; "
        f"every server: {peers.PROFILE.threads} threads, {peers.PROFILE.ctx_size} context, "
        f"{peers.PROFILE.slots} slots where it has slots{_flags()}. Servers: "
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
    lines += ["", _idle_line(report)]
    if report.get("decode_churn"):
        lines += ["", decode_churn.markdown(report["decode_churn"]).rstrip("\n")]
    if report.get("doc_qa"):
        lines += ["", doc_qa_report.markdown(report["doc_qa"]).rstrip("\n")]
    if report.get("long_doc_qa"):
        lines += ["", long_doc_qa.markdown(report["long_doc_qa"]).rstrip("\n")]
    if report.get("background"):
        lines += ["", background.markdown(report["background"]).rstrip("\n")]
    if report.get("ingest"):
        lines += ["", ingest.markdown(report["ingest"], with_targets=False).rstrip("\n")]
    if report.get("speculation"):
        lines += ["", speculation.markdown(report["speculation"]).rstrip("\n")]
    if report.get("cluster"):
        lines += ["", cluster_report.markdown(report["cluster"]).rstrip("\n")]
    lines += ["", *table_lines(targets(report))]
    return "\n".join(head + lines) + "\n"


def _idle_line(report: dict) -> str:
    """What each server computed while another was timed: its share of the 2 cores was free."""
    idle = [(n, s.get("idle_cpu_s")) for n, s in report["servers"].items()]
    shown = ", ".join(f"{n} {v:.1f} s" for n, v in idle if v is not None)
    return f"CPU used by each server while the others were timed: {shown or 'not measured'}."


def chart(report: dict, path: Path) -> None:
    """Warm/cold TTFT per scenario (log scale) beside aggregate decode: the prefix-reuse part."""
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


def headline(report: dict) -> str:
    """The README's table: per target, ours and llama-server's values, the ratio and verdict."""
    verdicts = {name: f"{bound}: {verdict}" for name, _, bound, verdict in targets(report)}
    m = report["machine"]
    lines = [
        f"Run {report['date']} on {_where(m)}; model `{report['model']}`; "
        "TTFT in seconds (lower is better), decode in tokens/s (higher is better).",
        "",
        "| | ours | llama-server | ours / llama-server | target |",
        "|---|---:|---:|---:|---|",
    ]
    for name, ours, peer in _headline_values(report):
        ratio = _f(ours / peer, 2) if ours is not None and peer else "–"
        cells = f"{_value(ours)} | {_value(peer)} | {ratio} | {verdicts.get(name, '')}"
        lines.append(f"| {name} | {cells} |")
    met = sum(v.endswith(": met") for v in verdicts.values())
    lines += ["", f"Targets met: {met} of {len(verdicts)}."]
    return "\n".join(lines) + "\n"


def write_between_markers(path: Path, block: str) -> bool:
    """Put `block` between the file's markers; False (file untouched) when they are missing."""
    text = path.read_text()
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        return False
    path.write_text(f"{text[:start]}{START}\n{block}{END}{text[end + len(END) :]}")
    return True


def _headline_values(report: dict) -> list[tuple[str, float | None, float | None]]:
    """(target name, ours, llama-server) in the order of `targets`."""
    servers = report["servers"]
    ours, peer = servers.get("ours", {}), servers.get("llama-server", {})
    warm = [("scenarios", g, "warm_ttft") for g in report["scenario_names"]]
    rows = [(f"warm TTFT: {w[1]}", _get(ours, *w), _get(peer, *w)) for w in warm]
    for key in prefix.several_clients(report["throughput_names"]):
        rate = ("throughput", key, "tokens_per_s")
        rows.append((f"aggregate tok/s: {key}", _get(ours, *rate), _get(peer, *rate)))
    if churn := report.get("decode_churn"):
        pair = churn["servers"].get("ours", {}), churn["servers"].get("llama-server", {})
        for label, group, k, bound, _ in decode_churn.SPEC:
            if bound is not None:
                rows.append((label, _get(pair[0], group, k), _get(pair[1], group, k)))
    if qa := report.get("doc_qa"):
        pair = qa["rows"].get("ours", {}), qa["rows"].get(doc_qa_report.SCORE_ORDER, {})
        rows.append((doc_qa_report.TARGET, _get(pair[0], "mean_ttft"), _get(pair[1], "mean_ttft")))
    if long_qa := report.get("long_doc_qa"):
        rows += long_doc_qa.values(long_qa)
    return rows


def _get(row: dict | None, *keys: str) -> float | None:
    for key in keys:
        if not isinstance(row, dict):
            return None
        row = row.get(key)
    return row


def _f(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _value(x: float | None) -> str:
    """Seconds to the ms, rates (and long times) to a tenth."""
    return _f(x, 1 if x is not None and x >= 10 else 3)


def _cached(s: dict) -> str:
    if s.get("cached_tokens") is None or s.get("prompt_tokens") is None:
        return "n/a"
    return f"{s['cached_tokens']:.0f}/{s['prompt_tokens']:.0f}"


def _note(report: dict, name: str) -> str:
    note = report["servers"][name].get("notes")
    return f" ({note})" if note else ""


def _where(machine: dict) -> str:
    """The CPU and its cores, and the GPU where the run had one."""
    gpu = f", GPU {machine['gpu']}" if machine.get("gpu") else ""
    return f"{machine['cpu']}, {machine['cores']} cores{gpu}"


def _flags() -> str:
    flags = " ".join(peers.PROFILE.common_args)
    return f", `{flags}`" if flags else ""
