"""`Model`'s vocabulary lookups on the real packaged model."""

from __future__ import annotations

from app.engine.engine_config import EngineConfig
from app.engine.llama.model import Model


def test_pieces_and_end_of_generation_are_cached_apart_for_special_text(model_path: str):
    model = Model(EngineConfig(model_path=model_path, n_ctx=256, n_parallel=1))
    try:
        eos = model.eos
        # The end token reads as its name only when special text is asked for: one cache entry
        # must not answer for the other.
        assert model.token_to_piece(eos, special=True) == b"<|im_end|>"
        assert model.token_to_piece(eos) == b""
        assert model.token_to_piece(eos, special=True) == b"<|im_end|>"
        for token in model.tokenize("Hello world, caf\u00e9", add_special=False):
            first = model.token_to_piece(token)
            assert first
            assert model.token_to_piece(token) is first  # the second lookup is the cached bytes
            assert not model.is_eog(token) and not model.is_eog(token)
        assert model.is_eog(eos) and model.is_eog(eos)
        assert model.detokenize(model.tokenize("Hello world", add_special=False)) == "Hello world"
    finally:
        model.close()
