"""`python -m bench.draft_cost`: what a draft token costs, by batch size, on this machine.

    python -m bench.draft_cost [--model PATH] [--ctx 600] [--threads 2] [--repeats 6]

One thread loads the model (the engine's `Model`), fills `--ctx` tokens into each of 4
sequences, then times single decodes: b sequences' next token (b = 1, 2, 4), with k draft tokens
after the first sequence's (k = 0, 1, 2, 4, 8, 16), every row asking for logits as a verified
draft does. Each decode is undone (`seq_rm`), so all run at the same context length. Prints, per
b, the step without drafts, tau = step / b, and for each k the extra milliseconds and
c = extra / k / tau: a draft token's cost in generated tokens' worth, the figure the engine's
`DraftCost` measures from its own steps (speculation pays where a draft token's chance of
acceptance is above c). The median of `--repeats` decodes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

BATCH_SIZES = (1, 2, 4)
DRAFTS = (0, 1, 2, 4, 8, 16)


def measure(model_path: str, ctx: int, threads: int, repeats: int) -> dict[int, dict[int, float]]:
    """{b: {k: median seconds of a decode of b tokens and k draft tokens}}."""
    from app.engine.engine_config import EngineConfig
    from app.engine.llama.model import Model

    n_seq = max(BATCH_SIZES)
    config = EngineConfig(model_path=model_path, n_ctx=8192, n_parallel=n_seq, n_threads=threads)
    model = Model(config)
    batch, rnd = model.new_batch(), random.Random(0)
    prompt = [rnd.randrange(1000, 20000) for _ in range(ctx)]
    for seq in range(n_seq):
        for i in range(0, ctx, 256):
            batch.clear()
            batch.add_run(prompt[i : i + 256], i, seq)
            model.decode(batch)

    def step(b: int, k: int) -> float:
        batch.clear()
        for seq in range(b):
            for j in range(1 + (k if seq == 0 else 0)):
                batch.add(rnd.randrange(1000, 20000), ctx + j, seq, True)
        t0 = time.perf_counter()
        model.decode(batch)
        seconds = time.perf_counter() - t0
        for seq in range(b):
            model.seq_rm(seq, ctx, -1)
        return seconds

    times: dict[int, dict[int, list[float]]] = {b: {k: [] for k in DRAFTS} for b in BATCH_SIZES}
    for _ in range(repeats):
        for b in BATCH_SIZES:
            for k in DRAFTS:
                times[b][k].append(step(b, k))
    batch.close()
    return {b: {k: statistics.median(v) for k, v in row.items()} for b, row in times.items()}


def lines(result: dict[int, dict[int, float]]) -> list[str]:
    out = ["| b | step ms | tau ms | " + " | ".join(f"k={k}: +ms (c)" for k in DRAFTS[1:]) + " |"]
    out.append("|---" * (3 + len(DRAFTS) - 1) + "|")
    for b, row in result.items():
        base = row[0]
        tau = base / b
        extra = {k: row[k] - base for k in DRAFTS[1:]}
        cells = [f"{extra[k] * 1e3:.1f} ({extra[k] / k / tau:.2f})" for k in extra]
        out.append(f"| {b} | {base * 1e3:.1f} | {tau * 1e3:.1f} | " + " | ".join(cells) + " |")
    return out


def main() -> None:
    from app.config_derived import packaged_model_path

    p = argparse.ArgumentParser(prog="python -m bench.draft_cost")
    p.add_argument("--model", default=None)
    p.add_argument("--ctx", type=int, default=600)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=6)
    args = p.parse_args()
    result = measure(args.model or packaged_model_path(), args.ctx, args.threads, args.repeats)
    print("\n".join(lines(result)))


if __name__ == "__main__":
    main()
