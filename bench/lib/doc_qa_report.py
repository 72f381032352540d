"""The document-QA bench's targets and table (bench/doc_qa.py), from its report alone:
bench.lib.report puts them into `python -m bench.compare`'s report, and tests build them from a
made-up report. The row names are the report's keys, which bench/doc_qa.py fills.
"""

from __future__ import annotations

from bench.lib.targets import Target, target
from bench.workloads.doc_qa_workload import TOP_K

SCORE_ORDER = "llama-server, score order"  # the row the target compares ours with
TARGET = "document QA mean TTFT, chunks in score order"
NO_PREFILL = "ours, no document prefill"
BLEND = "ours, blend"
NEW = "ours, new combinations"
NEW_BLEND = "ours, blend, new combinations"


def targets(report: dict) -> list[Target]:
    """Ours at most half llama-server's mean TTFT when it gets the chunks best first, as a
    typical RAG app sends them: what laying them out for the cache is worth."""
    ours, score = report["rows"].get("ours"), report["rows"].get(SCORE_ORDER)
    if not ours or not score:
        return []
    out = [target(TARGET, ours["mean_ttft"], score["mean_ttft"], 0.5, at_most=True)]
    rows = report["rows"]
    for k in [""] + [name.removeprefix(BLEND) for name in rows if name.startswith(BLEND + ", k=")]:
        out += blend_targets(rows.get(BLEND + k), rows.get(NEW_BLEND + k), rows, k)
    return out


def blend_targets(blended: dict | None, blend: dict | None, rows: dict, k: str) -> list[Target]:
    """The two blend targets (docs/blend.md, "Speed"), for the blend rows of one k (`k`: ""
    or ", k=K")."""
    out = []
    score, new = rows[SCORE_ORDER], rows.get(NEW)
    if blended:  # with chunk KV reused at any position, a quarter of the peer's
        name = f"document QA mean TTFT with blend{k}, chunks in score order"
        out.append(target(name, blended["mean_ttft"], score["mean_ttft"], 0.25, at_most=True))
    if new and blend:  # blend on new combinations at most 0.35x prefix reuse
        name = f"document QA new combinations mean TTFT, blend{k} vs prefix reuse"
        out.append(target(name, blend["mean_ttft"], new["mean_ttft"], 0.35, at_most=True))
    return out


def markdown(report: dict) -> str:
    plan = report["plan"]
    lines = [
        f"Document QA: {plan['documents']} documents, {plan['questions']} questions over "
        f"{plan['topics']} Zipf-popular topics, top {TOP_K} chunks. Ingestion "
        f"{report['ingest_s']:.1f} s for {report['chunks']} chunks "
        f"({report['chunks_per_s']:.1f} chunks/s; embedder load {report['embedder_load_s']:.1f} s "
        f"before it); retrieval (query embedding, search, layout) {report['retrieval_ms']:.1f} ms "
        f"per question. Ingestion and the documents' prefill into the cache (idle-time work, "
        f"done before the questions): {report.get('prefill_s', float('nan')):.1f} s; with "
        f"blend (each chunk's own KV too): {report.get('blend_prefill_s', float('nan')):.1f} s.",
        "",
        "| server | mean TTFT s | p50 s | p95 s | cached share |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in report["rows"].items():
        share = "n/a" if row["cached_share"] is None else f"{row['cached_share']:.2f}"
        lines.append(
            f"| {name} | {row['mean_ttft']:.3f} | {row['p50_ttft']:.3f} | "
            f"{row['p95_ttft']:.3f} | {share} |"
        )
    if "seen" in report:
        lines += ["", f"New combinations: {report['seen']:.0%} of their chunks seen before."]
    if report.get("blend_gate"):
        lines += ["", gate_line(report["blend_gate"])]
    for name, ratio, bound, verdict in targets(report):
        if name.startswith("document QA new combinations"):
            which = name.removeprefix("document QA new combinations mean TTFT, ")
            line = f"ours {which}, new combinations, mean TTFT: {ratio:.2f}"
        elif "with blend" in name:
            line = f"{name.removeprefix('document QA mean TTFT with ')}: ours / llama-server"
            line += f", mean TTFT: {ratio:.2f}"
        else:
            line = f"ours / llama-server (score order), mean TTFT: {ratio:.2f}"
        lines += ["", f"{line} ({bound}: {verdict})"]
    for name, why in report["failed"].items():
        lines.append(f"\n{name} failed: {why}")
    return "\n".join(lines) + "\n"


def gate_line(gate: dict) -> str:
    """What the blend rows' answers are worth: `GET /props`' kv_reuse of the blend server."""
    k, agreement = gate["blend_sink_tokens"], gate.get("blend_agreement")
    if agreement is None:
        measured = "never measured against full prefill"
    else:
        measured = (
            f"its answers matched full prefill's in {agreement['exact_greedy']:.0%} of the "
            f"quality set (answer F1 {agreement['f1']:.2f}, bench.blend_quality at k = "
            f"{agreement['k']})"
        )
    forced = " (forced past the quality gate: --blend-force)" if gate.get("blend_forced") else ""
    return f"Blend at k = {k}{forced}: {measured}."
