"""StepCost: a step's fixed cost in prompt tokens, measured from steps, and when a step ends."""

from __future__ import annotations

import pytest

from app.engine.core.step_cost import MIN_END, PRIOR_TOKENS, StepCost


def test_the_prior_holds_until_small_and_large_steps_were_timed():
    cost = StepCost()
    assert cost.overhead_tokens() == PRIOR_TOKENS
    cost.observe(1, 0.010)
    cost.observe(30, 0.050)  # neither small nor large: not counted
    assert cost.overhead_tokens() == PRIOR_TOKENS
    cost.observe(501, 1.510)  # 3 ms a token over a 1-token step's 10 ms: 7 ms fixed
    assert cost.overhead_tokens() == pytest.approx(7 / 3)


def test_a_gpu_like_machine_has_a_large_overhead_and_noise_never_makes_it_negative():
    gpu = StepCost()
    gpu.observe(1, 0.008)
    gpu.observe(512, 0.020)
    assert gpu.overhead_tokens() > 300
    noisy = StepCost()
    noisy.observe(1, 0.050)
    noisy.observe(512, 0.040)  # the large step ran while the machine was less loaded
    assert noisy.overhead_tokens() == float("inf")


def test_a_step_ends_where_the_prompts_behind_would_add_more_than_their_extra_steps_cost():
    cpu = StepCost()  # the prior: a step is worth 4 prompt tokens
    assert cpu.ends_step([800, 800], room=200)  # 200 tokens of one prompt > 4
    assert cpu.ends_step([30, 30, 30], room=200)  # 90 tokens of three prompts > 12
    assert not cpu.ends_step([3], room=200)  # 3 tokens of one prompt < 4
    assert not cpu.ends_step([], room=200) and not cpu.ends_step([800], room=0)
    # Short prompts behind go into the step whatever the ratio (MIN_END).
    assert not cpu.ends_step([20, 20], room=200)
    cpu.observe(1, 0.010)
    cpu.observe(501, 5.010)  # 10 ms a token: a step's fixed part is worth nothing
    assert cpu.overhead_tokens() == 0.0
    assert not cpu.ends_step([MIN_END - 1], room=200) and cpu.ends_step([MIN_END], room=200)
    gpu = StepCost()
    gpu.observe(1, 0.008)
    gpu.observe(512, 0.020)
    assert not gpu.ends_step([800, 800], room=200)  # one step more costs more: fill it
