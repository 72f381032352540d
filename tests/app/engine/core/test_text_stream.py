from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.engine.core.text_stream import TextStream


def feed(stream: TextStream, pieces: list[bytes]) -> str:
    return "".join(stream.push(p) for p in pieces) + stream.finish()


def test_multibyte_character_split_across_tokens_is_emitted_whole():
    stream = TextStream()
    data = "é€😀".encode()
    outputs = [stream.push(data[i : i + 1]) for i in range(len(data))]
    # Nothing half-decoded ever comes out: each output is empty or whole characters.
    assert "".join(outputs) == "é€😀"
    assert all("\ufffd" not in o for o in outputs)
    assert outputs[0] == "" and outputs[1] == "é"


def test_stop_string_is_cut_and_never_emitted_even_across_tokens():
    stream = TextStream(["STOP"])
    out = [stream.push(p) for p in [b"hello S", b"TO", b"P and more"]]
    assert "".join(out) == "hello "
    assert stream.stop_hit == "STOP"
    assert stream.push(b"later") == "" and stream.finish() == ""


def test_partial_stop_prefix_is_released_when_it_turns_out_not_to_be_a_stop():
    stream = TextStream(["</end>"])
    assert stream.push(b"a </e") == "a "
    assert stream.push(b"x") == "</ex"
    assert stream.finish() == ""


def test_earliest_stop_wins():
    stream = TextStream(["bb", "a"])
    assert feed(stream, [b"xxbba"]) == "xx"
    assert stream.stop_hit == "bb"


@given(st.text(max_size=40), st.lists(st.integers(1, 5), max_size=20))
def test_any_split_of_bytes_gives_the_same_text(text: str, cuts: list[int]):
    data = text.encode()
    pieces, i = [], 0
    for c in cuts:
        pieces.append(data[i : i + c])
        i += c
    pieces.append(data[i:])
    assert feed(TextStream(), pieces) == text


@given(
    st.text(alphabet="abc", max_size=30),
    st.text(alphabet="abc", min_size=1, max_size=3),
    st.integers(1, 4),
)
def test_output_is_text_before_first_stop(text: str, stop: str, step: int):
    data = text.encode()
    stream = TextStream([stop])
    out = feed(stream, [data[i : i + step] for i in range(0, len(data), step)])
    i = text.find(stop)
    assert out == (text[:i] if i >= 0 else text)
