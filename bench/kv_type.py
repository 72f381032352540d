"""`python -m bench.kv_type`: how much more a fixed host cache holds with a q8_0 KV than with f16.

    python -m bench.kv_type [--cache-ram MIB] [--no-cache-idle-slots]

Our server runs twice with the same `--cache-ram` (flash attention on both times, which a
quantized V cache needs): `-ctk/-ctv f16`, then `q8_0`. Each time, 8 conversations take 3 turns
on 4 slots (bench/lib/core.py's scenario, without its cold references, which would take slots), so
half of them find their slot taken and need their prefix from host memory. Printed per KV type:
the bytes per cached token the host cache counts, how many tokens the budget held at the end,
the hits per tier, and the share of warm prompt tokens served from cache.
"""

from __future__ import annotations

import argparse

import httpx

from bench.lib import core, peers
from bench.lib.client import Result


def no_cold(*_: object, **__: object) -> Result:
    """Stands in for the scenario's cold reference: nothing is sent."""
    return Result(1.0, 1.0, "", 0, 0, 0)


def run(model: str, kv: str, cache_ram: int, extra: tuple[str, ...]) -> dict:
    args = ("--cache-ram", str(cache_ram), "-ctk", kv, "-ctv", kv, "-fa", "on", *extra)
    with peers.ours(model, extra=args) as peer:
        rows = core.eight_sessions_three_turns(peer.base_url, no_cold, 4, 8)
        cache = httpx.get(peer.base_url + "/cache", timeout=60).json()
    prompt = sum(w.prompt_tokens or 0 for _, w, _ in rows)
    cached = sum(w.cached_tokens or 0 for _, w, _ in rows)
    host = cache["host"]
    return {
        "bytes_per_token": host["bytes_per_token"],
        "tokens_held": host["tokens"],
        "hits": cache["hits"],
        "cached_share": cached / prompt if prompt else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kv_type", allow_abbrev=False)
    p.add_argument("--cache-ram", type=int, default=16, help="host cache budget, MiB")
    p.add_argument("--no-cache-idle-slots", action="store_true")
    args = p.parse_args(argv)
    from app.config_derived import packaged_model_path

    extra = ("--no-cache-idle-slots",) if args.no_cache_idle_slots else ()
    model = packaged_model_path()
    print(f"--cache-ram {args.cache_ram} MiB, 8 conversations x 3 turns on 4 slots")
    print("| KV | bytes/token | tokens held | host hits | warm tokens from cache |")
    print("|---|---:|---:|---:|---:|")
    for kv in ("f16", "q8_0"):
        r = run(model, kv, args.cache_ram, extra)
        print(
            f"| {kv} | {r['bytes_per_token']:.0f} | {r['tokens_held']} | {r['hits']['host']} | "
            f"{r['cached_share']:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
