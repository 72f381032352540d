"""`POST /slots/{id}?action=save|restore|erase` through the real path (server + packaged model).

The server runs with --cache-ram 0 and no disk tier: after an erase, the saved file is the only
way the slot's KV can come back, so cached tokens after a restore prove the restore worked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.lib.server_process import ServerProcess
from tests.eventually import eventually

PROMPT = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a small "
    "brass lantern and a notebook in which he wrote down the colour of the sea, the direction "
    "of the wind, and the names of the ships that passed the rocks below. In forty years he had "
    "never missed a night, not even during the great storm that tore the roof off the village "
    "church. His only company was a grey cat called Pepper, who slept on the warm lamp housing "
    "and woke only when the fishing boats came home. Write one sentence about what he saw on "
    "the last night:"
)


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slot-actions")


@pytest.fixture(scope="module")
def slot_dir(tmp_dir: Path) -> Path:
    return tmp_dir / "slots"  # not created: the first save creates it


@pytest.fixture(scope="module")
def server(tmp_dir: Path, slot_dir: Path) -> Iterator[ServerProcess]:
    args = ("-np", "2", "-c", "2048", "--cache-ram", "0", "--data-dir", str(tmp_dir / "data"))
    with ServerProcess(*args, "--slot-save-path", str(slot_dir)) as srv:
        yield srv


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


def complete(http: httpx.Client, id_slot: int = 0, **extra) -> dict:
    body = {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "id_slot": id_slot, **extra}
    reply = http.post("/v1/completions", json=body)
    assert reply.status_code == 200, reply.text
    return reply.json()["usage"]


def action(http: httpx.Client, id_slot: int, name: str, filename: object = None) -> httpx.Response:
    body = None if filename is None else {"filename": filename}
    return http.post(f"/slots/{id_slot}", params={"action": name}, json=body)


def n_cached(http: httpx.Client, id_slot: int) -> int:
    return next(s["n_cached"] for s in http.get("/slots").json() if s["id"] == id_slot)


def test_save_erase_restore_brings_the_prefix_back(http: httpx.Client, slot_dir: Path):
    first = complete(http)
    assert first["prompt_tokens"] >= 100
    held = n_cached(http, 0)
    assert held >= first["prompt_tokens"]

    saved = action(http, 0, "save", "conv.bin")
    assert saved.status_code == 200, saved.text
    body = saved.json()
    assert (body["id_slot"], body["filename"], body["n_saved"]) == (0, "conv.bin", held)
    assert body["n_written"] == (slot_dir / "conv.bin").stat().st_size
    assert body["timings"]["save_ms"] >= 0

    erased = action(http, 0, "erase")
    assert erased.status_code == 200, erased.text
    assert erased.json() == {"id_slot": 0, "n_erased": held}
    assert n_cached(http, 0) == 0
    assert complete(http)["prompt_tokens_details"]["cached_tokens"] == 0  # nothing to reuse
    assert action(http, 0, "erase").status_code == 200

    restored = action(http, 0, "restore", "conv.bin")
    assert restored.status_code == 200, restored.text
    body = restored.json()
    assert (body["id_slot"], body["filename"], body["n_restored"]) == (0, "conv.bin", held)
    assert body["n_read"] == (slot_dir / "conv.bin").stat().st_size
    assert "restore_ms" in body["timings"]
    assert n_cached(http, 0) == held

    again = complete(http)
    assert again["prompt_tokens_details"]["cached_tokens"] >= 0.9 * again["prompt_tokens"]


@pytest.mark.parametrize(
    "name", ["../x", "../../escape.bin", "/etc/passwd", "a/b", "..", ".", "", "a\x00b", ".hid"]
)
def test_unsafe_names_are_refused_and_nothing_is_written(
    http: httpx.Client, tmp_dir: Path, name: str
):
    before = sorted(p for p in tmp_dir.rglob("*") if "data" not in p.parts)
    for verb in ("save", "restore"):
        reply = action(http, 1, verb, name)
        assert reply.status_code == 400, reply.text
        assert reply.json()["error"]["param"] == "filename"
    assert sorted(p for p in tmp_dir.rglob("*") if "data" not in p.parts) == before
    assert not (tmp_dir / "x").exists() and not (tmp_dir.parent / "escape.bin").exists()


def test_a_file_that_is_not_a_slot_save_is_never_overwritten(http: httpx.Client, slot_dir: Path):
    slot_dir.mkdir(exist_ok=True)
    notes = slot_dir / "notes.txt"
    notes.write_bytes(b"precious")
    reply = action(http, 1, "save", "notes.txt")
    assert reply.status_code == 400, reply.text
    assert "not a slot save" in reply.json()["error"]["message"]
    assert notes.read_bytes() == b"precious"
    assert action(http, 1, "restore", "notes.txt").status_code == 400


def test_a_corrupt_file_is_refused_and_the_server_still_serves(http: httpx.Client, slot_dir: Path):
    saved = action(http, 1, "save", "one.bin")
    assert saved.status_code == 200, saved.text
    raw = (slot_dir / "one.bin").read_bytes()
    (slot_dir / "bad.bin").write_bytes(raw[:-1] + bytes([raw[-1] ^ 0xFF]))
    held = n_cached(http, 0)
    reply = action(http, 0, "restore", "bad.bin")
    assert reply.status_code == 400, reply.text
    assert "damaged" in reply.json()["error"]["message"]
    assert n_cached(http, 0) == held  # the slot was not touched
    assert complete(http, id_slot=1)["completion_tokens"] >= 1


def test_missing_file_unknown_action_and_slot(http: httpx.Client):
    assert action(http, 0, "restore", "never-saved.bin").status_code == 404
    assert action(http, 0, "load", "conv.bin").json()["error"]["param"] == "action"
    assert action(http, 7, "erase").json()["error"]["param"] == "id_slot"
    assert action(http, 0, "save").json()["error"]["param"] == "filename"
    assert action(http, 0, "save", 5).status_code == 400  # not a string


def test_a_busy_slot_answers_409(http: httpx.Client, server: ServerProcess):
    body = {"prompt": PROMPT, "max_tokens": 400, "id_slot": 1, "stream": True, "ignore_eos": True}
    with (
        httpx.Client(base_url=server.base_url, timeout=120) as other,
        other.stream("POST", "/v1/completions", json=body) as stream,
    ):
        # Keep the line iterator: a discarded one is closed, and closing it closes the
        # connection, which cancels the request (the slot would then be idle, not busy).
        lines = stream.iter_lines()
        next(line for line in lines if line.startswith("data:"))  # generating now
        reply = action(http, 1, "save", "busy.bin")
        assert reply.status_code == 409, reply.text
        assert reply.json()["error"]["code"] == "slot_busy"

    # The stream was closed: once the request is cancelled, the slot accepts actions again.
    def erased() -> bool:
        reply = action(http, 1, "erase")
        assert reply.status_code == 200, reply.text
        return True

    eventually(erased, "slot 1 to be free")


def test_a_parked_slot_is_saved_with_what_its_conversation_holds(tmp_dir: Path):
    """Default flags park an idle slot's KV in host memory when another request starts; a
    save then still writes the slot's conversation (llama-server saves it), and a restore of
    that file serves it again."""
    slots = tmp_dir / "parked-slots"
    args = ("-np", "2", "-c", "2048", "--data-dir", str(tmp_dir / "parked-data"))
    with (
        ServerProcess(*args, "--slot-save-path", str(slots)) as srv,
        httpx.Client(base_url=srv.base_url, timeout=120) as client,
    ):
        first = complete(client, id_slot=0)
        other = "Write a haiku about the sea. " * 30  # long enough to park the idle slot
        complete(client, id_slot=1, prompt=other)
        assert n_cached(client, 0) == 0  # parked: its cells are free
        saved = action(client, 0, "save", "parked.bin")
        assert saved.status_code == 200, saved.text
        assert saved.json()["n_saved"] >= first["prompt_tokens"]
        assert action(client, 0, "erase").status_code == 200
        assert action(client, 1, "restore", "parked.bin").status_code == 200
        again = complete(client, id_slot=1)
        assert again["prompt_tokens_details"]["cached_tokens"] >= 0.9 * again["prompt_tokens"]


def test_no_slots_turns_off_the_listing_only(tmp_dir: Path):
    """--no-slots, as llama-server's: GET /slots is a 501, but save, erase and restore still
    work (llama.cpp's test_slot_save.py starts its server with --no-slots)."""
    data = tmp_dir / "no-slots-data"
    args = ("-np", "2", "-c", "2048", "--cache-ram", "0", "--no-slots")
    with (
        ServerProcess(*args, "--data-dir", str(data)) as srv,
        httpx.Client(base_url=srv.base_url, timeout=120) as client,
    ):
        listing = client.get("/slots")
        assert listing.status_code == 501, listing.text
        assert "`--slots`" in listing.json()["error"]["message"]

        first = complete(client, id_slot=0)
        saved = action(client, 0, "save", "kept.bin")
        assert saved.status_code == 200, saved.text
        assert saved.json()["n_saved"] >= first["prompt_tokens"]
        assert action(client, 0, "erase").status_code == 200
        assert complete(client)["prompt_tokens_details"]["cached_tokens"] == 0  # erased
        assert action(client, 0, "erase").status_code == 200
        restored = action(client, 0, "restore", "kept.bin")
        assert restored.status_code == 200, restored.text
        assert restored.json()["n_restored"] == saved.json()["n_saved"]
        again = complete(client)
        assert again["prompt_tokens_details"]["cached_tokens"] >= 0.9 * again["prompt_tokens"]
    assert (data / "slots" / "kept.bin").is_file()  # no --slot-save-path: under --data-dir
