from __future__ import annotations

from app.engine.sampler import Sampler, SamplingParams


def test_penalty_window_is_clamped_to_the_context():
    huge = Sampler(SamplingParams(frequency_penalty=0.5, repeat_last_n=2**31 - 1), 49152, 2048)
    whole = Sampler(SamplingParams(frequency_penalty=0.5, repeat_last_n=-1), 49152, 2048)
    small = Sampler(SamplingParams(frequency_penalty=0.5, repeat_last_n=16), 49152, 2048)
    try:
        assert huge._last_n == 2048
        assert whole._last_n == 2048  # -1 = the whole context, as in llama-server
        assert small._last_n == 16
    finally:
        for s in (huge, whole, small):
            s.close()


def test_greedy_and_penalty_flags():
    assert SamplingParams(temperature=0).greedy
    assert not SamplingParams().has_penalties
    assert SamplingParams(repeat_penalty=1.1).has_penalties
    assert not SamplingParams(repeat_penalty=1.1, repeat_last_n=0).has_penalties
