"""A timed training probe under a time limit cannot cut a compiled call short: it times one
step, sizes its calls to the limit, and a what-if (give_up) whose one step is over the limit
is not measured (TooSlow) while a required rate still is."""

from __future__ import annotations

import time

import pytest
import tensorflow as tf

from tfperf.measure.probes import TooSlow, training_probe


def slow_steps(seconds_per_step: float, calls: list[int]):
    def run_steps(it, n: int) -> float:
        calls.append(n)
        for _ in range(n):
            next(it)
            time.sleep(seconds_per_step)
        return 0.0

    return run_steps


def test_a_what_if_whose_one_step_is_over_the_limit_gives_up():
    calls: list[int] = []
    ds = tf.data.Dataset.range(1000)
    probe = training_probe(
        "slow",
        slow_steps(0.3, calls),
        ds,
        steps=30,
        warmup=5,
        examples_per_step=1,
        time_limit=0.1,
        give_up=True,
    )
    with pytest.raises(TooSlow, match="one step took 0.3 s, over the 0.1 s"):
        probe()
    assert calls == [1, 1]  # one traced step, one timed: never 30 or the 5 warm-up steps


def test_a_required_rate_is_still_measured_in_calls_sized_to_the_limit():
    calls: list[int] = []
    ds = tf.data.Dataset.range(1000)
    probe = training_probe(
        "slow",
        slow_steps(0.02, calls),
        ds,
        steps=30,
        warmup=5,
        examples_per_step=1,
        time_limit=0.2,
    )
    run = probe()
    assert run.examples > 0
    # a quarter of the limit per call: 0.05 s / 0.02 s per step -> 2 steps, not 30
    assert max(calls[2:]) <= 3, calls
