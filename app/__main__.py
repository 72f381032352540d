"""`python -m app`: start the server with llama-server-like flags (`python -m app keys ...`:
API keys, see app/keys_cli.py; `python -m app docs ingest ...`: documents from a shell, see
app/docs/cli.py).

Flags override KVCHAT_* environment variables, which override the defaults; every setting is
declared once in app/config.py (reference: docs/configuration.md).
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys

import uvicorn

from app.config import Settings
from app.setting import add_flags, settings_info


def parse_args(argv: list[str] | None = None) -> dict[str, object]:
    """The flags given, by setting name (one flag per setting, from its declaration)."""
    p = argparse.ArgumentParser(prog="python -m app", description=__doc__, allow_abbrev=False)
    add_flags(p, settings_info(Settings))
    args = vars(p.parse_args(argv))
    return {k: v for k, v in args.items() if v is not None}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["keys"]:
        from app.keys_cli import main as keys_main

        sys.exit(keys_main(argv[1:]))
    if argv[:1] == ["docs"]:
        from app.docs.cli import main as docs_main

        sys.exit(docs_main(argv[1:]))
    settings = Settings(**parse_args(argv))
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if settings.router_mode:  # a server per model behind this one (app/router)
        from app.router_server import create_router_app

        app = create_router_app(settings, argv)
    else:
        from app.server import create_app  # after logging is configured

        app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.hosts()[0],
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=settings.shutdown_grace,
    )
    hosts = settings.hosts()
    # Several addresses (llama-server's --host a,b): one socket each, one server on them all.
    sockets = [listen(host, settings.port) for host in hosts] if len(hosts) > 1 else None
    uvicorn.Server(config).run(sockets=sockets)


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


if __name__ == "__main__":
    main()
