"""`python -m app docs ingest PATH... --collection NAME`: the server's ingestion pipeline, run
from a shell with a progress bar, into the same database and index files the server uses.
`python -m app docs reembed --collection NAME|ID [--embedding-backend B]`: a collection's
vectors made again with this backend (app/docs/intake/reembed.py), e.g. after an upgrade changed the
default backend.

Documents already in the collection (same content) are skipped. Each is claimed as a server's
worker claims it (app/db/replicas/ingest_claims.py), so a server on the same database does not
ingest it too; a running server's index syncs with the database before its next search of the
collection.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import socket
import sys
from pathlib import Path

from tqdm import tqdm

from app.cache.state_file import cached_fingerprint
from app.config import Settings
from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.background.ingest_lease import LeaseKeeper
from app.docs.background.ingestor import ingest_document
from app.docs.intake.reembed import ReembedConflict, reembed_collection
from app.docs.library import DocLibrary
from app.docs.ocr_setup import ocr_setup
from app.docs.questions.doc_prompt import token_counter
from app.engine.vocabulary import open_vocabulary
from rag.chunker import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS
from rag.errors import DocumentError
from rag.loader import load
from rag.parse_limits import ParseLimits


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m app docs", allow_abbrev=False, description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    ingest = sub.add_parser("ingest", allow_abbrev=False, help="add documents to a collection")
    ingest.add_argument("paths", nargs="+", type=Path)
    ingest.add_argument("--collection", required=True, help="name; created if missing")
    ingest.add_argument("--chunk-tokens", type=int, default=DEFAULT_CHUNK_TOKENS)
    ingest.add_argument("--overlap-tokens", type=int, default=DEFAULT_OVERLAP_TOKENS)
    ingest.add_argument("-m", "--model", help="chat model GGUF (its tokenizer counts tokens)")
    ingest.add_argument("--data-dir")
    ingest.add_argument("--database-url")
    ingest.add_argument("--embedding-model")
    ingest.add_argument("--embedding-threads", type=int)
    ingest.add_argument("--embedding-backend")
    ingest.add_argument("--doc-max-bytes", type=int)
    reembed = sub.add_parser(
        "reembed", allow_abbrev=False, help="embed a collection again with this backend"
    )
    reembed.add_argument("--collection", required=True, help="its id, or its name")
    for flag in ("--data-dir", "--database-url", "--embedding-model", "--embedding-backend"):
        reembed.add_argument(flag)
    reembed.add_argument("--embedding-threads", type=int)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    flags = {k: v for k, v in vars(args).items() if v is not None and k in Settings.model_fields}
    settings = Settings(**flags)
    store = Store(settings.database())
    store.migrate()
    try:
        if args.command == "reembed":
            return reembed(args, settings, store)
        return ingest(args, settings, store)
    finally:
        store.close()


def library_of(settings: Settings, chunk_store: ChunkStore) -> DocLibrary:
    return DocLibrary(
        chunk_store,
        settings.index_dir(),
        settings.embedding_model,
        settings.embedding_threads,
        settings.embedding_backend,
    )


def reembed(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    wanted = args.collection
    if wanted not in chunk_store.collection_ids():
        named = [c.id for c in docs.list_collections("") if c.name == wanted]
        if not named:
            print(
                f"no collection {wanted!r} (an id, or a name of the default tenant)",
                file=sys.stderr,
            )
            return 1
        wanted = named[0]
    library = library_of(settings, chunk_store)
    with tqdm(desc=args.collection, unit="chunk") as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        try:
            n = reembed_collection(chunk_store, library, wanted, progress)
        except ReembedConflict as e:
            print(e, file=sys.stderr)
            return 1
    # The index file is rebuilt from the new vectors by the next server (running ones notice).
    library.dropped(wanted)
    print(f"collection {wanted}: {n} chunks embedded with {settings.embedding_backend}")
    return 0


def ingest(args: argparse.Namespace, settings: Settings, store: Store) -> int:
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    found = [c for c in docs.list_collections("") if c.name == args.collection]
    collection = (
        found[0]
        if found
        else docs.create_collection(
            "", args.collection, args.chunk_tokens, args.overlap_tokens, None
        )
    )
    model = open_vocabulary(settings.model_path())
    library = library_of(settings, chunk_store)
    key = cached_fingerprint(settings.model_path())
    worker = f"cli:{socket.gethostname()[:100]}:{os.getpid()}"
    ocr = ocr_setup(settings)  # scans and images read here, as a server's worker reads them
    limits = ocr.parse_limits(ParseLimits())
    failed = 0
    try:
        for path in args.paths:
            try:
                data = path.read_bytes()
                loaded = load(path.name, data, settings.doc_max_bytes, limits=limits)
            except (OSError, DocumentError) as e:
                print(f"{path}: {e}", file=sys.stderr)
                failed += 1
                continue
            record, duplicate = docs.add_document(
                "",
                collection.id,
                filename=path.name,
                kind=loaded.kind,
                sha256=hashlib.sha256(data).hexdigest(),
                text=loaded.text,
                page_starts=loaded.page_starts,
                metadata={"path": str(path)},
                ocr_pages=loaded.ocr_pages,
                source=data,
            )
            if duplicate and record.status == "ready":
                print(f"{path}: already in {args.collection} as {record.id}")
                continue
            with tqdm(desc=path.name, unit="chunk") as bar:

                def progress(done: int, total: int, bar: tqdm = bar) -> None:
                    bar.total = total
                    bar.update(done - bar.n)

                # Claimed like a server's worker does: a server on the same database does not
                # ingest it too (and takes it over if this command dies).
                if not chunk_store.claims.claim(record.id, worker, settings.ingest_lease):
                    print(f"{path}: a server is ingesting it ({record.id})")
                    continue
                try:
                    with LeaseKeeper(chunk_store.claims, record.id, worker, settings.ingest_lease):
                        ingest_document(
                            chunk_store,
                            library,
                            token_counter(model),
                            key,
                            record.id,
                            progress,
                            worker=worker,
                            ocr=ocr,
                        )
                except Exception as e:
                    reason = f"ingestion failed: {e}"
                    chunk_store.set_progress(record.id, "error", 0, 0, reason, worker)
                    print(f"{path}: {e}", file=sys.stderr)
                    failed += 1
        print(f"collection {args.collection} ({collection.id})")
    finally:
        library.flush()
        model.close()
    return 1 if failed else 0
