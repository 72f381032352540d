"""`python -m app keys create|list|revoke|open`: API keys from the command line.

    python -m app keys create --name alice [--admin] [--tenant T]   # prints the key last
    python -m app keys list
    python -m app keys revoke KEY_ID_OR_NAME
    python -m app keys open                                         # serve without keys again

Revoking the last key leaves the server keyed (it refuses every client); `open` is the one way
back to a server without keys: it removes the revoked keys, and refuses while a key is live.

The same --data-dir / --database-url (and their environment variables) as the server, so the
keys land in the database the server reads. The schema is migrated first, as at start-up.
"""

from __future__ import annotations

import argparse
import sys

from app.config import Settings
from app.db.key_store import KeyStore, LiveKeysError
from app.db.store import Store


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m app keys", description=__doc__, allow_abbrev=False)
    db = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    db.add_argument("--data-dir", help="the server's data directory (SQLite database)")
    db.add_argument("--database-url", help="SQLAlchemy URL, e.g. postgresql+psycopg://...")
    sub = p.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", parents=[db], help="make a key", allow_abbrev=False)
    create.add_argument("--name", required=True, help="who the key is for")
    create.add_argument("--tenant", help="tenant that owns what the key creates (default: name)")
    create.add_argument("--admin", action="store_true", help="may use /metrics, /slots, /cache")
    sub.add_parser("list", parents=[db], help="list keys (never the keys themselves)")
    revoke = sub.add_parser("revoke", parents=[db], help="revoke by key id or name")
    revoke.add_argument("key", help="a key id (key-...) or a name: all live keys of that name")
    sub.add_parser(
        "open",
        parents=[db],
        help="serve without keys: removes the revoked keys (refused while a key is live)",
    )
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    overrides = {k: v for k in ("data_dir", "database_url") if (v := getattr(args, k)) is not None}
    store = Store(Settings(**overrides).database())
    try:
        store.migrate()
        keys = KeyStore(store)
        if args.command == "create":
            try:
                record, key = keys.create(args.name, args.tenant, args.admin)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            role = "admin" if record.admin else "user"
            print(f"created {record.id} ({role}) for {record.name}, tenant {record.tenant_id!r}")
            print("the key is shown this once; store it now:")
            print(key)
        elif args.command == "list":
            for k in keys.list():
                state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "live"
                role = "admin" if k.admin else "user"
                print(f"{k.id}\t{k.name}\ttenant={k.tenant_id}\t{role}\t{state}")
        elif args.command == "open":
            return _open(keys)
        else:
            revoked = keys.revoke(args.key)
            if not revoked:
                print(f"error: no live key with id or name {args.key!r}", file=sys.stderr)
                return 1
            for k in revoked:
                print(f"revoked {k.id} ({k.name})")
            if not keys.any_live():
                print(
                    "no live key left: the server refuses every client until a key is created "
                    "(keys create) or an admin opens it (keys open)"
                )
        return 0
    finally:
        store.close()


def _open(keys: KeyStore) -> int:
    try:
        removed = keys.open_server()
    except LiveKeysError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for k in removed:
        print(f"removed {k.id} ({k.name}, revoked)")
    print("no API keys: the server is open to every client that reaches it")
    return 0
