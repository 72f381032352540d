from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.cache import state_file
from app.cache.state_file import MAGIC, StateFileError
from mm.token_sequence import MediaChunk, TokenSequence

MODEL = "fingerprint-a"
# A complete header whose token list holds a negative (non-media) token.
BAD_TOKENS = {"format": 1, "salt": "", "tokens": [1, -5], "media": [], "n_bytes": 0, "sha256": ""}


def save(path: Path, salt: str, tokens: TokenSequence, data: bytes, model: str = MODEL) -> int:
    head = state_file.header_bytes(state_file.encode_header(salt, tokens, data, model))
    return state_file.write(path, head, data)


def test_round_trip_keeps_tokens_media_salt_and_data(tmp_path: Path):
    seq = TokenSequence([1, 2])
    seq.add_media(MediaChunk("img", 3, 2))
    seq.extend([9])
    path = tmp_path / "s.bin"
    n = save(path, "tenant", seq, b"\x00state\xff")
    assert n == path.stat().st_size
    header, data = state_file.load(path, MODEL)
    assert (header.salt, header.tokens, data) == ("tenant", seq, b"\x00state\xff")
    assert header.tokens.n_pos == seq.n_pos
    assert state_file.load_header(path, MODEL).n_bytes == len(data)
    assert state_file.is_state_file(path)
    assert os.listdir(tmp_path) == ["s.bin"]  # no temp file left behind


def test_another_model_or_format_is_refused(tmp_path: Path):
    path = tmp_path / "s.bin"
    save(path, "", TokenSequence([1]), b"data", model="fingerprint-b")
    with pytest.raises(StateFileError, match="another model"):
        state_file.load(path, MODEL)
    header = state_file.encode_header("", TokenSequence([1]), b"data", MODEL)
    header["format"] = 99
    path.write_bytes(state_file.header_bytes(header) + b"data")
    with pytest.raises(StateFileError, match="format 99"):
        state_file.load(path, MODEL)
    assert state_file.is_state_file(path)  # ours (magic), just not loadable


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]),  # one flipped bit
        lambda raw: raw[:-2],  # truncated
        lambda raw: raw + b"more",  # grown
    ],
)
def test_damaged_data_is_refused(tmp_path: Path, damage):
    path = tmp_path / "s.bin"
    save(path, "", TokenSequence([1, 2, 3]), b"some state bytes")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(StateFileError, match="damaged"):
        state_file.load(path, MODEL)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"hello world\n",
        MAGIC + b"not json\n",
        MAGIC + b"[1, 2]\n",
        MAGIC + json.dumps({"format": 1, "model": MODEL}).encode() + b"\n",
        MAGIC + json.dumps({**BAD_TOKENS, "model": MODEL}).encode() + b"\n",
    ],
)
def test_garbage_is_refused_with_a_state_file_error(tmp_path: Path, raw: bytes):
    path = tmp_path / "s.bin"
    path.write_bytes(raw)
    with pytest.raises(StateFileError):
        state_file.load(path, MODEL)


def test_is_state_file_is_false_for_other_things(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "dir").mkdir()
    os.mkfifo(tmp_path / "fifo")  # must not block
    for name in ("notes.txt", "dir", "fifo", "missing"):
        assert not state_file.is_state_file(tmp_path / name)


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path: Path):
    path = tmp_path / "s.bin"
    save(path, "", TokenSequence([1]), b"old")
    with pytest.raises(TypeError):
        state_file.write(path, b"head", None)  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == ["s.bin"]
    assert state_file.load(path, MODEL)[1] == b"old"


def test_fingerprint_changes_with_the_model_file(tmp_path: Path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"a" * 5000)
    first = state_file.cached_fingerprint(str(model))
    assert state_file.cached_fingerprint(str(model)) == first
    model.write_bytes(b"b" * 6000)
    assert state_file.cached_fingerprint(str(model)) != first
