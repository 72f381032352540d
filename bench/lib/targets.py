"""The targets a benchmark run is held to: ours / llama-server ratios against fixed bounds.

Each part of `python -m bench.compare` (bench.workloads.prefix, bench.decode_churn, bench.doc_qa)
states its own targets through `target()`, so that one Targets table can list every target of the
run in one shape, and a part run alone prints the same verdicts as the whole run.
"""

from __future__ import annotations

import json
from pathlib import Path

# (target, ours / llama-server or None when either side is missing, bound, verdict)
Target = tuple[str, float | None, str, str]


def target(
    name: str, ours: float | None, peer: float | None, bound: float, *, at_most: bool
) -> Target:
    """One row: `at_most` when lower is better (times), else the ratio must reach `bound`."""
    ratio = ours / peer if ours is not None and peer else None
    met = ratio is not None and (ratio <= bound if at_most else ratio >= bound)
    verdict = "–" if ratio is None else ("met" if met else "not met")
    return (name, ratio, f"{'≤' if at_most else '≥'} {bound:g}", verdict)


def table_lines(rows: list[Target]) -> list[str]:
    """The markdown lines of the Targets table (a note instead when nothing could be compared)."""
    lines = ["Targets, ours / llama-server:", ""]
    if not rows:
        return [*lines, "(not evaluated: llama-server or ours did not run)"]
    lines += ["| target | ours / llama-server | bound | |", "|---|---:|---|---|"]
    for name, ratio, bound, verdict in rows:
        shown = "–" if ratio is None else f"{ratio:.2f}"
        lines.append(f"| {name} | {shown} | {bound} | {verdict} |")
    return lines


def ratio_table(
    names: list[str],
    rows: list[tuple[str, list[float], float | None, float | None]],
    first: str = "row",
) -> list[str]:
    """The markdown lines of a results table: one column per server, then ours / llama-server.
    `rows`: (label, a value per server in `names`' order, ours, llama-server's)."""
    lines = [
        f"| {first} |" + "".join(f" {n} |" for n in names) + " ours / llama-server |",
        "|---|" + "---:|" * (len(names) + 1),
    ]
    for label, values, ours, peer in rows:
        ratio = f"{ours / peer:.2f}" if ours is not None and peer else ""
        lines.append(f"| {label} |" + "".join(f" {v:.3f} |" for v in values) + f" {ratio} |")
    return lines


def failed_lines(report: dict) -> list[str]:
    """A line per server that could not run, with why."""
    return [f"\n{name} failed: {why}" for name, why in report.get("failed", {}).items()]


def write_report(
    out: Path, stem: str, title: str, table: str, report: dict, rows: list[Target]
) -> None:
    """A run's files (`stem`.md with `table` under `title`, `stem`.json with `report`) in `out`,
    and the table with its targets on standard output."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(f"# {title}\n\n{table}")
    (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
    print("\n" + table + "\n" + "\n".join(table_lines(rows)))
