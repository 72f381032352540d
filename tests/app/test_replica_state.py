"""Two replicas on one PostgreSQL database, each with a data directory of its own: whatever a
request can reach is in the database, so either replica serves it.

Media uploaded to one is read and used by the other; a document ingested on one is found by the
other's search (its index synced from the database) and, once deleted on one, is never found by
the other and leaves the other's KV; a key revoked from the command line is refused by both at
once; a document whose claiming replica is killed mid-ingestion is finished by the other once
the claim's lease has run out. Skipped without PostgreSQL (`make test` starts one).
"""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from PIL import Image

from app.db.documents.chunk_store import ChunkStore
from app.db.store import Store
from app.docs.background.ingest_lease import worker_id
from bench.lib.server_process import ROOT, ServerProcess, make_key
from tests.db_urls import fresh_database_url
from tests.eventually import eventually

ADMIN = "replica-admin-key-0123456789"
LEASE_S = 3  # --ingest-lease: how long a killed replica's document waits for the other
BUSY_TOKENS = 3000  # a generation that outlasts an upload, its claim and a kill (then stopped)
ETNA = "Mount Etna is an active volcano in Sicily. Its eruptions send lava down its slopes."
TEA = "Green tea leaves are steamed or pan-fired soon after picking to stop oxidation."
BREAD = "Sourdough bread rises with wild yeast and lactic bacteria kept in a flour starter."


@dataclass
class Replica:
    server: ServerProcess
    data_dir: Path

    def call(
        self, method: str, path: str, key: str = ADMIN, headers: dict | None = None, **kw
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}", **(headers or {})}
        return httpx.request(method, self.server.base_url + path, headers=headers, **kw)


@dataclass
class Cluster:
    url: str
    a: Replica
    b: Replica
    keys: dict[str, str]

    def store(self) -> Store:
        return Store(self.url)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("replicas")
    mmproj = root / "tiny-mmproj.gguf"
    script = ROOT / "scripts" / "make_tiny_mmproj.py"
    subprocess.run([sys.executable, str(script), str(mmproj)], check=True, capture_output=True)
    with fresh_database_url("postgresql", root) as url:
        keys = {name: make_key(root / "keys", name, "--database-url", url) for name in ("alice",)}
        keys["bob"] = make_key(root / "keys", "bob", "--database-url", url, "--tenant", "alice")
        replicas = []
        try:
            for name in ("a", "b"):
                data = root / name
                args = ["-np", "1", "-c", "4096", "--data-dir", str(data)]
                args += ["--database-url", url, "--api-key", ADMIN, "--mmproj", str(mmproj)]
                args += ["--image-max-pixels", "262144", "--doc-prefill-tokens", "0"]
                args += ["--ingest-lease", str(LEASE_S)]
                replicas.append(Replica(ServerProcess(*args).start(), data))
            yield Cluster(url, replicas[0], replicas[1], keys)
        finally:
            for r in replicas:
                r.server.stop()


def picture(seed: int) -> bytes:
    im = Image.new("RGB", (64, 64))
    im.putdata([((x * 5 + seed) % 256, (x * 3) % 256, seed % 256) for x in range(64 * 64)])
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def new_collection(replica: Replica, key: str, name: str) -> str:
    r = replica.call("POST", "/v1/collections", key, json={"name": name})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def upload(replica: Replica, key: str, col: str, filename: str, text: str) -> str:
    body = {"filename": filename, "text": text}
    r = replica.call("POST", f"/v1/collections/{col}/documents", key, json=body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def status(replica: Replica, key: str, doc: str) -> str:
    return replica.call("GET", f"/v1/documents/{doc}", key).json()["status"]


def search(replica: Replica, key: str, col: str, query: str) -> list[str]:
    r = replica.call("POST", f"/v1/collections/{col}/search", key, json={"query": query})
    assert r.status_code == 200, r.text
    return [hit["document_id"] for hit in r.json()["data"]]


def test_media_uploaded_to_one_replica_is_read_and_used_by_the_other(cluster: Cluster):
    alice = cluster.keys["alice"]
    data = picture(7)
    up = cluster.a.call(
        "POST", "/v1/media", alice, content=data, headers={"Content-Type": "image/png"}
    )
    assert up.status_code == 201, up.text
    media_id = up.json()["id"]
    content = cluster.b.call("GET", f"/v1/media/{media_id}/content", alice)
    assert content.status_code == 200 and content.content == data
    assert not list(cluster.b.data_dir.rglob("*.png"))  # read from the database, not a file
    part = {"type": "image_file", "image_file": {"file_id": media_id}}
    body = {
        "messages": [{"role": "user", "content": [part, {"type": "text", "text": "What?"}]}],
        "max_tokens": 2,
        "temperature": 0,
    }
    chat = cluster.b.call("POST", "/v1/chat/completions", alice, json=body)
    assert chat.status_code == 200, chat.text


def test_a_key_revoked_on_the_command_line_is_refused_by_every_replica_at_once(cluster: Cluster):
    bob = cluster.keys["bob"]
    for replica in (cluster.a, cluster.b):
        assert replica.call("GET", "/v1/sessions", bob).status_code == 200
    subprocess.run(
        [sys.executable, "-m", "app", "keys", "revoke", "bob", "--database-url", cluster.url],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    for replica in (cluster.a, cluster.b):  # the very next request: keys are not cached
        r = replica.call("GET", "/v1/sessions", bob)
        assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]
        assert replica.call("GET", "/v1/sessions", cluster.keys["alice"]).status_code == 200


def test_a_document_ingested_on_one_replica_is_searched_on_the_other_until_deleted(
    cluster: Cluster,
):
    alice = cluster.keys["alice"]
    col = new_collection(cluster.a, alice, "shared")
    assert search(cluster.b, alice, col, "volcano") == []  # b's index exists, empty
    etna, tea = (
        upload(cluster.a, alice, col, "etna.txt", ETNA),
        upload(cluster.a, alice, col, "tea.txt", TEA),
    )
    for doc in (etna, tea):
        eventually(lambda doc=doc: status(cluster.b, alice, doc) == "ready", f"{doc} to be ready")
    assert search(cluster.b, alice, col, "volcano in Sicily")[0] == etna
    # b's slot now holds Etna's chunks: an answer about it, laid out from b's search.
    asked = cluster.b.call(
        "POST", f"/v1/collections/{col}/ask", alice, json={"question": "Where is Etna?"}
    )
    assert asked.status_code == 200, asked.text
    assert eventually(lambda: slot_tokens(cluster.b) > 0, "b's slot to hold the answer")
    assert cluster.a.call("DELETE", f"/v1/documents/{etna}", alice).status_code == 200
    for _ in range(3):
        assert etna not in search(cluster.b, alice, col, "volcano in Sicily")
    assert search(cluster.b, alice, col, "green tea")[0] == tea
    # b read the deletion log: the KV of its slot that held Etna's chunks is gone.
    eventually(lambda: slot_tokens(cluster.b) == 0, "b to drop the deleted document's KV")


def slot_tokens(replica: Replica) -> int:
    return sum(s["n_cached"] for s in replica.call("GET", "/slots").json())


@dataclass
class Busy:
    """A long streamed generation on a replica, in a thread, until `stop`: while it runs the
    replica's ingestion worker holds its claim but waits before embedding (background work
    yields to clients)."""

    replica: Replica
    key: str
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Busy:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        eventually(lambda: generating(self.replica), "the generation to run")
        return self

    def _run(self) -> None:
        body = {"prompt": "Once upon a time", "max_tokens": BUSY_TOKENS, "ignore_eos": True}
        body["stream"] = True
        url = self.replica.server.base_url + "/v1/completions"
        headers = {"Authorization": f"Bearer {self.key}"}
        # The replica may be killed under it.
        with suppress(httpx.HTTPError), httpx.stream("POST", url, headers=headers, json=body) as r:
            for _ in r.iter_lines():
                if self.done.is_set():
                    return  # closing the stream cancels the generation

    def stop(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()


def generating(replica: Replica) -> bool:
    return any(s["state"] == "processing" for s in replica.call("GET", "/slots").json())


def test_a_document_whose_replica_is_killed_mid_ingestion_is_finished_by_the_other(
    cluster: Cluster,
):
    """Last in this module: one replica is gone after it."""
    alice = cluster.keys["alice"]
    col = new_collection(cluster.b, alice, "takeover")
    replicas = {worker_id(r.data_dir): r for r in (cluster.a, cluster.b)}
    store = cluster.store()
    try:
        claims = ChunkStore(store).claims
        generations = [Busy(r, alice).start() for r in (cluster.a, cluster.b)]
        doc = upload(cluster.b, alice, col, "bread.txt", BREAD)
        victim = replicas[eventually(lambda: claims.holder(doc)[0], "a claim")]
        survivor = cluster.a if victim is cluster.b else cluster.b
        assert generating(victim)  # so its worker has not embedded anything yet
        victim.server.proc.kill()  # SIGKILL: its claim stays until the lease runs out
        victim.server.proc.wait()
        assert status(survivor, alice, doc) != "ready"
        for generation in generations:  # the survivor may ingest now
            generation.stop()
        eventually(lambda: status(survivor, alice, doc) in ("ready", "error"), f"{doc} to be done")
        assert status(survivor, alice, doc) == "ready"
        assert claims.holder(doc) == (None, False)
        assert search(survivor, alice, col, "sourdough starter")[0] == doc
    finally:
        store.close()
