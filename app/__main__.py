"""`python -m app`: start the server with llama-server-like flags (`python -m app keys ...`:
API keys, see app/keys_cli.py).

Flags override KVCHAT_* environment variables, which override the defaults (see app/config.py).
"""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn

from app.config import Settings


def parse_args(argv: list[str] | None = None) -> dict[str, object]:
    p = argparse.ArgumentParser(prog="python -m app", description=__doc__, allow_abbrev=False)
    p.add_argument("-m", "--model", help="GGUF model path (default: the packaged SmolLM2)")
    p.add_argument("-a", "--alias", dest="model_alias", help="model name shown to clients")
    p.add_argument("-c", "--ctx-size", type=int, help="total context (KV cells), all slots")
    p.add_argument("-np", "--parallel", type=int, help="number of slots")
    p.add_argument("-t", "--threads", type=int, help="threads for generation")
    p.add_argument(
        "-tb", "--threads-batch", type=int, help="threads for prompt processing (default: -t)"
    )
    p.add_argument(
        "-ngl",
        "--n-gpu-layers",
        "--gpu-layers",
        dest="n_gpu_layers",
        type=int,
        help="layers on the GPU (default: all when the build has a GPU backend)",
    )
    p.add_argument("-fa", "--flash-attn", choices=["on", "off", "auto"], help="default auto")
    kv_types = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"]
    p.add_argument("-ctk", "--cache-type-k", choices=kv_types, help="KV cache type of K")
    p.add_argument("-ctv", "--cache-type-v", choices=kv_types, help="KV cache type of V")
    p.add_argument("--no-mmap", dest="mmap", action="store_false", default=None)
    p.add_argument("--mlock", action="store_true", default=None, help="keep the model in RAM")
    p.add_argument("-b", "--batch-size", type=int)
    p.add_argument("-ub", "--ubatch-size", type=int)
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--no-cache-prompt", dest="cache_prompt", action="store_false", default=None)
    p.add_argument("-sps", "--slot-prompt-similarity", type=float)
    p.add_argument(
        "-cram",
        "--cache-ram",
        type=int,
        help="host prompt cache MiB (default 8192; 0 off, -1 no limit)",
    )
    p.add_argument("--cache-ram-tokens", type=int, help="host prompt cache budget in tokens")
    p.add_argument(
        "--cache-reuse", type=int, help="min chunk to reuse from the cache by KV shifting (0 = off)"
    )
    p.add_argument("--cache-policy", choices=["lru", "gdsf"], help="host cache eviction")
    p.add_argument(
        "--kv-reuse",
        choices=["prefix", "blend"],
        help="document requests' default: reuse chunk KV at any position (blend) or prefix only",
    )
    p.add_argument(
        "--blend-sink-tokens", type=int, help="tokens recomputed at the start of a blended chunk"
    )
    p.add_argument(
        "--cache-idle-slots",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="on a new task, move idle slots' KV to the host cache and free their cells",
    )
    p.add_argument("--cache-dir", help="keep saved KV states in this directory across restarts")
    p.add_argument("--cache-disk", type=int, help="disk tier budget MiB (0 = no limit)")
    p.add_argument("--data-dir", help="SQLite database, media and slot files (default: data)")
    p.add_argument("--database-url", help="SQLAlchemy URL, e.g. postgresql+psycopg://...")
    p.add_argument("--slot-save-path", help="directory for /slots save and restore files")
    p.add_argument("--max-queue", type=int, help="waiting requests before 503 (0 = no bound)")
    p.add_argument(
        "-n", "--n-predict", type=int, help="default and most tokens per reply (-1 = no limit)"
    )
    p.add_argument(
        "--ctx-per-request", type=int, help="KV cells one request may use (0 = ctx / parallel)"
    )
    p.add_argument("--max-body-bytes", type=int, help="largest request body (413 beyond)")
    p.add_argument(
        "--max-concurrent-per-key", type=int, help="requests at once per API key (0 = no limit)"
    )
    p.add_argument("--api-key", help="a static API key clients must send as Bearer (admin)")
    p.add_argument("--timeout", dest="request_timeout", type=float, help="seconds per request")
    p.add_argument("--shutdown-grace", type=float, help="seconds to finish requests at shutdown")
    p.add_argument("--mmproj", help="multimodal projector GGUF for image input")
    p.add_argument("--image-max-bytes", type=int, help="largest accepted image file")
    p.add_argument("--image-max-pixels", type=int, help="largest accepted width x height")
    p.add_argument(
        "--allow-remote-images", action="store_true", default=None, help="fetch http(s) images"
    )
    p.add_argument("--encoder-cache", type=int, help="vision encoder output cache, MiB")
    p.add_argument("--doc-max-bytes", type=int, help="largest accepted document upload, bytes")
    p.add_argument("--embedding-model", help="sentence-transformers model folder for documents")
    p.add_argument("--embedding-threads", type=int, help="torch threads for embeddings")
    p.add_argument(
        "--doc-prefill-tokens",
        type=int,
        help="tokens of each new document computed into the prefix cache while idle (0: off)",
    )
    p.add_argument("-s", "--seed", type=int)
    p.add_argument(
        "--no-swa-full",
        dest="swa_full",
        action="store_false",
        default=None,
        help="sliding-window models: keep only the window (less memory, less reuse)",
    )
    p.add_argument(
        "--idle-prefill-delay",
        type=float,
        help="seconds idle before a chat's next-turn boundary is prefilled (<0 off)",
    )
    p.add_argument(
        "--burst-wait",
        type=float,
        help="seconds an idle server waits for requests still being read before it prefills, "
        "so that requests sent at once are prefilled together (0 off)",
    )
    p.add_argument(
        "-dt",
        "--defrag-thold",
        type=float,
        help="compact the KV cache when cuts may have freed more than this share of its cells "
        "under cells in use (< 0 off)",
    )
    p.add_argument("--no-warmup", dest="warmup", action="store_false", default=None)
    p.add_argument("-v", "--verbose", action="store_true", default=None)
    p.add_argument("--log-level")
    args = vars(p.parse_args(argv))
    return {k: v for k, v in args.items() if v is not None}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["keys"]:
        from app.keys_cli import main as keys_main

        sys.exit(keys_main(argv[1:]))
    settings = Settings(**parse_args(argv))
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from app.server import create_app  # after logging is configured

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=settings.shutdown_grace,
    )


if __name__ == "__main__":
    main()
