"""`python -m bench.decode_limit`: the decode speed limit of this machine, a bare Python loop.

    python -m bench.decode_limit [--model PATH] [--tokens 400] [--threads 2] [--ctx 8192]

One thread loads the model and runs `llama_decode` one token at a time, greedy (argmax of the
logits), never stopping at end-of-generation: no server, no sampler chain, no event loop. What a
server adds on top of this per token is its overhead; `bench.compare` prints this figure beside
the single-stream decode rows of every server. Prints one JSON line:
{"tokens", "seconds", "tokens_per_s", "ms_per_token"}.

It runs in its own process (bench.compare starts it with `measure()`), so its OpenMP thread team
is the only one in that process, as in a server that keeps all compute on one thread.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np


def bare_loop(model_path: str, n_tokens: int, n_threads: int, n_ctx: int) -> dict:
    import llama_cpp

    from app.engine.engine_config import EngineConfig
    from app.engine.llama.model import Model

    model = Model(
        EngineConfig(model_path=model_path, n_ctx=n_ctx, n_parallel=1, n_threads=n_threads)
    )
    try:
        prompt = model.tokenize("Once upon a time, in a quiet village by the sea,")
        batch = model.new_batch()
        for i, token in enumerate(prompt):
            batch.add(token, i, 0, i == len(prompt) - 1)
        if model.decode(batch) != 0:
            raise RuntimeError("prompt decode failed")
        pos, row = len(prompt), batch.n_tokens - 1
        t0 = time.perf_counter()
        for _ in range(n_tokens):
            logits = np.ctypeslib.as_array(
                llama_cpp.llama_get_logits_ith(model.ctx, row), shape=(model.n_vocab,)
            )
            token = int(logits.argmax())
            batch.clear()
            row = batch.add(token, pos, 0, True)
            if model.decode(batch) != 0:
                raise RuntimeError("decode failed")
            pos += 1
        seconds = time.perf_counter() - t0
        batch.close()
    finally:
        model.close()
    return {
        "tokens": n_tokens,
        "seconds": seconds,
        "tokens_per_s": n_tokens / seconds,
        "ms_per_token": 1000.0 * seconds / n_tokens,
    }


def measure(model_path: str, n_tokens: int = 400, n_threads: int = 2, n_ctx: int = 8192) -> dict:
    """Run the bare loop in a fresh process and return its figures."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.decode_limit",
            "--model",
            model_path,
            "--tokens",
            str(n_tokens),
            "--threads",
            str(n_threads),
            "--ctx",
            str(n_ctx),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    from app.config_derived import packaged_model_path

    p = argparse.ArgumentParser(prog="python -m bench.decode_limit", allow_abbrev=False)
    p.add_argument("--model", default=None)
    p.add_argument("--tokens", type=int, default=400)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx", type=int, default=8192)
    args = p.parse_args(argv)
    result = bare_loop(args.model or packaged_model_path(), args.tokens, args.threads, args.ctx)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
