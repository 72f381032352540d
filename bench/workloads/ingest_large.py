"""One collection of 20,000 generated chunks (bench/ingest.py `--large`): what it costs.

In-process, on the server's own pieces: a SQLite store, `DocLibrary` (default embedding backend,
two threads) and `ingest_document` with the packaged chat model's tokenizer, as `python -m app
docs ingest` runs them. Documents of ~100 chunks (paragraphs of random words, one chunk each)
until the collection holds the chunks asked for. Measured:
- ingestion: time and chunks/s (no client requests; nothing else paces it);
- the index: file size, the process's RSS;
- search: p50/p95 of 200 queries, plain and hybrid (BM25 fused), after one warm query each;
- BM25 update: a document added drops the collection's BM25 index, the next hybrid search
  rebuilds it: the time of that search;
- restart: a new `DocLibrary` on the same database and files, `load_all` (the index file read,
  synced with the database's chunk ids; nothing re-embedded or rebuilt);
- delete of one document: the database delete and the index's removal.
"""

from __future__ import annotations

import hashlib
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from app.config_derived import packaged_model_path
from app.db.documents.chunk_store import ChunkStore
from app.db.documents.document_store import DocumentStore
from app.db.store import Store
from app.docs.background.ingestor import ingest_document
from app.docs.library import DocLibrary
from app.docs.questions.doc_prompt import token_counter
from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model
from bench.workloads.doc_qa_workload import WORDS
from rag.embedder import DEFAULT_BACKEND

PER_DOC = 100
QUERIES = 200


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def document(n: int, rnd: random.Random) -> str:
    """~PER_DOC chunks: paragraphs of ~120 words, each a chunk of its own."""
    return "\n\n".join(
        f"Record {n}.{p}: " + " ".join(rnd.choice(WORDS) for _ in range(120))
        for p in range(PER_DOC)
    )


def percentiles(times: list[float]) -> dict:
    ms = sorted(t * 1000 for t in times)
    return {"p50_ms": statistics.median(ms), "p95_ms": ms[int(0.95 * (len(ms) - 1))]}


def timed_searches(library: DocLibrary, col: str, queries: list[str], hybrid: bool) -> dict:
    library.search(col, queries[0], 4, None, None, hybrid)  # warm (embedder, BM25)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        library.search(col, q, 4, None, None, hybrid)
        times.append(time.perf_counter() - t0)
    return percentiles(times)


def run(chunks: int = 20_000, backend: str = DEFAULT_BACKEND) -> dict:
    rnd = random.Random(20_000)
    tmp = Path(tempfile.mkdtemp(prefix="kvchat-large-"))
    store = Store(f"sqlite:///{tmp}/large.db")
    store.migrate()
    docs, chunk_store = DocumentStore(store), ChunkStore(store)
    library = DocLibrary(chunk_store, tmp / "indexes", None, 2, backend)
    model = Model(EngineConfig(packaged_model_path(), n_ctx=256, n_parallel=1, warmup=False))
    tokenize, key = token_counter(model), "large-bench"
    col = docs.create_collection("", "large", 200, 20, None).id
    out: dict = {"backend": backend, "rss_before_mib": rss_mib()}
    library.embedder()  # loaded before the clock starts

    def add(n: int) -> tuple[str, float]:
        text = document(n, rnd)
        record, _ = docs.add_document(
            "",
            col,
            filename=f"record-{n}.txt",
            kind="text",
            sha256=hashlib.sha256(text.encode()).hexdigest(),
            text=text,
            page_starts=[],
            metadata={},
        )
        t0 = time.perf_counter()
        ingest_document(chunk_store, library, tokenize, key, record.id)
        return record.id, time.perf_counter() - t0

    t0, n, ids = time.perf_counter(), 0, []
    while len(library.index(col)) < chunks:
        ids.append(add(n)[0])
        n += 1
        if n % 20 == 0:
            print(f"{len(library.index(col))} chunks, {time.perf_counter() - t0:.0f} s", flush=True)
    library.flush()
    out["ingest_s"] = time.perf_counter() - t0
    out["chunks"] = len(library.index(col))
    out["chunks_per_s"] = out["chunks"] / out["ingest_s"]
    out["index_mib"] = library.index_path(col).stat().st_size / 2**20
    out["db_mib"] = (tmp / "large.db").stat().st_size / 2**20
    out["rss_mib"] = rss_mib()
    queries = [
        f"records of the {rnd.choice(WORDS)} and the {rnd.choice(WORDS)}" for _ in range(QUERIES)
    ]
    out["search"] = timed_searches(library, col, queries, hybrid=False)
    out["hybrid"] = timed_searches(library, col, queries, hybrid=True)
    _, out["add_one_doc_s"] = add(n)
    t0 = time.perf_counter()
    library.search(col, queries[0], 4, None, None, True)
    out["bm25_rebuild_s"] = time.perf_counter() - t0
    library.flush()
    index_file = library.index_path(col)
    written = index_file.stat().st_mtime_ns
    t0 = time.perf_counter()
    again = DocLibrary(chunk_store, tmp / "indexes", None, 2, backend)
    again.load_all()
    out["restart_s"] = time.perf_counter() - t0
    out["restart_rewrote_index"] = index_file.stat().st_mtime_ns != written
    victim = ids[len(ids) // 2]
    gone_chunks = [c.id for c in docs.chunks("", victim)]
    t0 = time.perf_counter()
    record = docs.delete_document("", victim)
    library.removed(record.collection_id, gone_chunks)
    out["delete_one_doc_s"] = time.perf_counter() - t0
    out["search_after_delete"] = timed_searches(library, col, queries[:50], hybrid=False)
    model.close()
    store.close()
    return out


def markdown(r: dict) -> str:
    return "\n".join(
        [
            f"One collection of {r['chunks']} generated chunks ({r['backend']}, in-process):",
            "",
            "| measure | value |",
            "|---|---:|",
            f"| ingestion | {r['ingest_s']:.0f} s ({r['chunks_per_s']:.1f} chunks/s) |",
            f"| index file | {r['index_mib']:.1f} MiB |",
            f"| database | {r['db_mib']:.0f} MiB |",
            f"| RSS (embedder, index, model's vocabulary) | {r['rss_mib']:.0f} MiB |",
            f"| search p50 / p95 | {r['search']['p50_ms']:.1f} / {r['search']['p95_ms']:.1f} ms |",
            f"| hybrid search p50 / p95 | {r['hybrid']['p50_ms']:.1f} / "
            f"{r['hybrid']['p95_ms']:.1f} ms |",
            f"| one more document (~{PER_DOC} chunks) | {r['add_one_doc_s']:.2f} s |",
            f"| BM25 rebuilt by the next hybrid search | {r['bm25_rebuild_s']:.2f} s |",
            f"| restart (index file read and synced) | {r['restart_s']:.2f} s, rewritten: "
            f"{r['restart_rewrote_index']} |",
            f"| delete one document | {r['delete_one_doc_s'] * 1000:.0f} ms |",
            f"| search p95 after the delete | {r['search_after_delete']['p95_ms']:.1f} ms |",
        ]
    )
