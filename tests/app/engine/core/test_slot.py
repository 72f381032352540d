"""`Slot`'s kept logits (unit level: a fake model that only tracks calls; hypothesis drives
sequences of the operations that rewrite or extend a slot's KV)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from app.engine.core.slot import Slot
from mm.token_sequence import TokenSequence


class FakeModel:
    """Every KV operation succeeds; no compute."""

    can_shift = True

    def can_keep(self, seq_id: int, pos: int) -> bool:
        return True

    def seq_rm(self, seq_id: int, p0: int, p1: int) -> bool:
        return True

    def seq_clear(self, seq_id: int) -> None:
        pass

    def seq_cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        pass

    def seq_shift(self, seq_id: int, p0: int, p1: int, delta: int) -> None:
        pass


tokens = st.lists(st.integers(0, 3), min_size=1, max_size=5)  # tiny vocab: repeats are common
operations = st.lists(
    st.one_of(
        st.tuples(st.just("prompt_done"), tokens),  # a prefill ends: its logits are kept
        st.tuples(st.just("decode"), tokens),  # generated or idle-prefilled tokens appended
        st.tuples(st.just("regrow"), st.none()),  # decode what a cut took of the last prompt
        st.tuples(st.just("cut"), st.integers(0, 12)),
        st.tuples(st.just("shift"), tokens),
        st.tuples(st.just("copy"), tokens),
        st.tuples(st.just("erase"), st.none()),
    ),
    max_size=12,
)


@given(operations)
def test_kept_logits_serve_exactly_the_prompt_they_ended_while_its_kv_is_untouched(ops):
    model, slot, donor = FakeModel(), Slot(0), Slot(1)
    expected: tuple[list[int], np.ndarray] | None = None  # (prompt, logits) the reference keeps
    last_prompt: list[int] = []
    for n, (op, arg) in enumerate(ops):
        if op == "prompt_done":
            slot.cache.extend(arg)
            logits = np.full(4, float(n), dtype=np.float32)
            slot.keep_logits(logits)
            logits[:] = -1.0  # the context's row is overwritten by the next decode: a copy
            expected = (list(slot.cache.tokens), np.full(4, float(n), dtype=np.float32))
            last_prompt = expected[0]
        elif op == "decode":
            slot.cache.extend(arg)
        elif op == "regrow":  # the same tokens again, but decoded anew: not the kept logits'
            held = list(slot.cache.tokens)
            if held == last_prompt[: len(held)]:
                slot.cache.extend(last_prompt[len(held) :])
        elif op == "cut":
            kept = slot.cut_to(min(arg, len(slot.cache)), model)
            if expected is not None and kept < len(expected[0]):
                expected = None
        elif op == "shift":  # a prompt whose tokens the KV holds further on
            prompt = TokenSequence([*arg, *slot.cache.tokens, 9])
            n_common = slot.cache.common_prefix(prompt)
            shifted = slot.shift_reuse(prompt, n_common, 1, model) > n_common
            if shifted and expected is not None and n_common < len(expected[0]):
                expected = None
        elif op == "copy":
            donor.cache = TokenSequence(arg)
            slot.copy_prefix(donor, len(arg), model)
            expected = None
        else:
            slot.erase(model)
            expected = None
        for candidate in (expected[0] if expected else None, list(slot.cache.tokens)):
            if candidate is None:
                continue
            found = slot.repeat_logits(TokenSequence(candidate), slot.salt)
            if expected is not None and candidate == expected[0]:
                assert found is not None and np.array_equal(found, expected[1])
                assert list(slot.cache.tokens[: len(candidate)]) == candidate
            else:
                assert found is None
    if expected is not None:
        assert slot.repeat_logits(TokenSequence(expected[0]), "another tenant") is None
