"""`python -m bench`: start our server, run the scenarios, print side-by-side ratios."""

from __future__ import annotations

import argparse
import subprocess
import sys

import httpx

from bench.lib import core
from bench.lib.server_process import ROOT, ServerProcess
from bench.workloads import images, sessions

TINY_MMPROJ = ROOT / "build" / "tiny-mmproj.gguf"


def tiny_mmproj() -> str:
    """Build the tiny test projector (random weights: only the caching means anything)."""
    TINY_MMPROJ.parent.mkdir(parents=True, exist_ok=True)
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(TINY_MMPROJ)], check=True, capture_output=True)
    return str(TINY_MMPROJ)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--url", help="use a running server instead of starting one")
    p.add_argument("--parallel", default="4")
    p.add_argument("--ctx-size", default="8192")
    p.add_argument(
        "--mmproj",
        help=f"projector for the server the bench starts (default: builds {TINY_MMPROJ})",
    )
    args = p.parse_args()

    server = None
    if args.url:
        base_url = args.url.rstrip("/")
    else:
        mmproj = args.mmproj or tiny_mmproj()
        server = ServerProcess(
            "--parallel", args.parallel, "--ctx-size", args.ctx_size, "--mmproj", mmproj
        ).start()
        base_url = server.base_url
    try:
        rows = (
            core.same_prompt_twice(base_url)
            + core.four_turn_chat(base_url)
            + core.four_users_at_once(base_url, precached=True)
            + core.four_users_at_once(base_url, precached=False)
            + core.eight_sessions_three_turns(base_url)
            + sessions.eight_sessions_four_turns(base_url)
        )
        saving = None
        if images.encoder_stats(base_url) is None:
            print("image re-ask skipped: the server runs without --mmproj")
        else:
            image_rows, saving = images.image_reask_with_encoder(base_url)
            rows += image_rows
        print(
            f"{'scenario':40} {'prompt':>6} {'cached':>6} {'cold s':>8} {'warm s':>8} "
            f"{'warm/cold':>9}"
        )
        for name, warm, reference in rows:
            print(
                f"{name:40} {warm.prompt_tokens or 0:6d} {warm.cached_tokens or 0:6d} "
                f"{reference.ttft:8.3f} {warm.ttft:8.3f} {warm.ttft / reference.ttft:9.3f}"
            )
        hits = httpx.get(base_url + "/cache").json()["hits"]
        print(f"\ncache hits by tier over the run: {hits}")
        if saving is not None:
            print(saving.describe())
        one, _ = core.decode_throughput(base_url, 1)
        four, _ = core.decode_throughput(base_url, 4)
        print(
            f"\ndecode tokens/s: 1 stream {one:.1f}, 4 streams {four:.1f} aggregate, "
            f"ratio {four / one:.2f}x"
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
