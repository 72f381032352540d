"""/tokenize's answer with pieces, written a piece at a time: the same JSON as one object."""

from __future__ import annotations

import json

from app.api.llama_server.token_routes import PIECES_AT_ONCE, _piece, _with_pieces


class Pieces:
    """A vocabulary whose token t reads "t<t>"; token 7 holds half of a character."""

    def token_to_piece(self, token: int, special: bool = False) -> bytes:
        return b"\xc3" if token == 7 else f"t{token}".encode()


def test_the_answer_written_in_pieces_is_the_whole_object():
    tokens = list(range(2 * PIECES_AT_ONCE + 5))
    written = "".join(_with_pieces(Pieces(), tokens))  # type: ignore[arg-type]
    expected = {"tokens": [{"id": t, "piece": _piece(Pieces().token_to_piece(t))} for t in tokens]}
    assert json.loads(written) == expected
    assert written == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
    assert json.loads(written)["tokens"][7]["piece"] == [0xC3]  # bytes where not whole UTF-8


def test_an_empty_text_has_no_pieces():
    assert "".join(_with_pieces(Pieces(), [])) == '{"tokens":[]}'  # type: ignore[arg-type]
