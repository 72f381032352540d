"""The cluster bench's workload (bench/cluster.py): sessions turn by turn, plus document questions.

Each session has a system prompt of its own (a generated document, unique per session); each
collection a few generated documents (bench/workloads/doc_qa_workload.py, one seed per collection)
and Zipf-popular questions about them. The workload goes in rounds: in round n every session sends
its n-th message and each collection gets its round's questions, all mixed and sent by
`Plan.clients` client threads, so a session's turns are sequential and every other session's
turn comes between two of them. Every request streams (TTFT to its first token) with short
replies; each is recorded as a `Call`, failures included (the kill -9 phase counts them).
The texts depend only on the plan, so every setup gets the same workload.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

from bench.lib.client import Result, create_session, stream, stream_session
from bench.lib.core import long_document
from bench.workloads import doc_qa_workload

HANG_GUARD_S = 600.0  # a setup whose documents never get ready fails instead of hanging
TOP_K = 4
MESSAGES = [
    "What is section 1 about?",
    "And section 2?",
    "Which year is in section 3?",
    "Which section names the most items?",
    "Thank you. Which section did you like best?",
    "Summarise the whole document in one line.",
]


@dataclass(frozen=True)
class Plan:
    sessions: int
    turns: int  # measured rounds
    collections: int
    documents: int  # per collection
    paragraphs: int  # per document (~65 tokens each)
    questions: int  # per collection and round
    system_paragraphs: int  # per session's system prompt
    clients: int  # client threads
    kill_rounds: int  # rounds after the kill -9 (hash setup)
    replicas: int = 3
    max_tokens: int = 12


FULL = Plan(24, 4, 3, 4, 2, 2, 5, 2, 2)
QUICK = Plan(6, 3, 1, 2, 1, 1, 3, 2, 2)


@dataclass(slots=True)
class Call:
    kind: str  # "turn" or "question"
    key: str  # the session's or the collection's id
    round: int  # 1-based; the kill -9 rounds follow the measured ones
    t0: float  # time.monotonic() when sent
    t1: float = 0.0  # when it ended (answered or failed)
    ok: bool = False
    error: str = ""
    replica: str | None = None
    ttft: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0

    def fill(self, r: Result) -> None:
        self.ok, self.replica, self.ttft = True, r.replica, r.ttft
        self.prompt_tokens, self.cached_tokens = r.prompt_tokens or 0, r.cached_tokens or 0


@dataclass(slots=True)
class Collection:
    id: str
    documents: list[str]
    questions: list[str]


@dataclass
class Workload:
    """One setup's run of the plan against `base` (nginx, or the one server)."""

    plan: Plan
    base: str
    sessions: list[str] = field(default_factory=list)
    collections: list[Collection] = field(default_factory=list)
    home: dict[str, str] = field(default_factory=dict)  # key -> the replica that last answered
    inflight: dict[int, Call] = field(default_factory=dict)  # read by the kill -9 thread
    lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count = field(default_factory=itertools.count)

    def prepare(self, replica_urls: list[str]) -> None:
        """Sessions and collections made, documents ingested and prefilled; every replica's
        embedder loaded (a search on each), so no measured request pays for that."""
        rounds = self.plan.turns + self.plan.kill_rounds
        for i in range(self.plan.sessions):
            system = long_document(self.plan.system_paragraphs, seed=f"session-{i}")
            self.sessions.append(create_session(self.base, system))
        qa = doc_qa_workload.Plan(
            self.plan.documents, self.plan.paragraphs, self.plan.questions * rounds, topics=3
        )
        for c in range(self.plan.collections):
            rnd = random.Random(100 + c)
            docs, asked = doc_qa_workload.corpus(qa, rnd), doc_qa_workload.questions(qa, rnd)
            r = httpx.post(f"{self.base}/v1/collections", json={"name": f"c{c}"}, timeout=60)
            cid = r.raise_for_status().json()["id"]
            ids = [
                httpx.post(
                    f"{self.base}/v1/collections/{cid}/documents",
                    json={"filename": f"c{c}-{name}", "text": text},
                    timeout=60,
                )
                .raise_for_status()
                .json()["id"]
                for name, _, text in docs
            ]
            self.collections.append(Collection(cid, ids, asked))
        for url in replica_urls:
            for col in self.collections:
                body = {"query": "warm up", "top_k": 1}
                httpx.post(f"{url}/v1/collections/{col.id}/search", json=body, timeout=600)
        for col in self.collections:
            wait_ready(replica_urls, col)

    def round(self, n: int) -> list[Call]:
        """Round n (1-based): every session's n-th message and the collections' questions."""
        jobs = [("turn", sid, MESSAGES[(n - 1) % len(MESSAGES)]) for sid in self.sessions]
        per = self.plan.questions
        for c, col in enumerate(self.collections):
            for i, q in enumerate(col.questions[(n - 1) * per : n * per]):
                # Spread among the turns, at the same places in every setup.
                at = random.Random(f"{n}-{c}-{i}").randrange(len(jobs) + 1)
                jobs.insert(at, ("question", col.id, q))
        with ThreadPoolExecutor(self.plan.clients) as pool:
            return list(pool.map(lambda job: self._call(n, *job), jobs))

    def _call(self, n: int, kind: str, key: str, text: str) -> Call:
        call, job = Call(kind, key, n, time.monotonic()), next(self._ids)
        with self.lock:
            self.inflight[job] = call
        try:
            if kind == "turn":
                r = stream_session(self.base, key, text, max_tokens=self.plan.max_tokens)
            else:
                body = {"question": text, "top_k": TOP_K, "max_tokens": self.plan.max_tokens}
                r = stream(f"{self.base}/v1/collections/{key}/ask", body)
            call.fill(r)
            if r.replica:
                self.home[key] = r.replica
        except (httpx.HTTPError, RuntimeError) as e:
            call.error = f"{type(e).__name__}: {e}"[:300]
        finally:
            call.t1 = time.monotonic()
            with self.lock:
                del self.inflight[job]
        return call


def wait_ready(replica_urls: list[str], col: Collection) -> None:
    """Until every document is ready and no replica still has its prefill queued."""
    deadline = time.monotonic() + HANG_GUARD_S
    for url in replica_urls:
        while True:
            r = httpx.get(f"{url}/v1/collections/{col.id}/documents", timeout=60)
            docs = [d for d in r.raise_for_status().json()["data"] if d["id"] in col.documents]
            if any(d["status"] == "error" for d in docs):
                raise RuntimeError(f"ingestion failed: {docs}")
            done = len(docs) == len(col.documents) and all(
                d["status"] == "ready" and d.get("prefill") != "queued" for d in docs
            )
            if done:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"documents of {col.id} not ready: {docs}")
            time.sleep(0.1)
