"""Precision: `auto` follows measurement (a policy made slow by a real sleep is never
chosen; a non-finite loss disqualifies), float16 trains through Keras 3's
LossScaleOptimizer, and every policy keeps float32 weights and a float32 loss."""

from __future__ import annotations

import math
import time

import pytest

from tfperf.config import load_config
from tfperf.hooks import Hook
from tfperf.train.loop import train
from tfperf.train.precision import POLICIES, PrecisionTrial, choose_precision, supported_policies

from helpers import trainkit


def _timed_trial(slow: dict[str, float], losses: dict[str, float] | None = None):
    def trial(policy: str) -> PrecisionTrial:
        t0 = time.perf_counter()
        for _ in range(3):
            time.sleep(slow.get(policy, 0.001))
        return PrecisionTrial(
            policy, (time.perf_counter() - t0) / 3, (losses or {}).get(policy, 0.5)
        )

    return trial


def test_choose_precision_keeps_the_fastest_measured_policy():
    choice = choose_precision(POLICIES, _timed_trial({"float32": 0.03, "mixed_float16": 0.05}))
    assert choice.policy == "mixed_bfloat16" and choice.measured
    assert [t.policy for t in choice.trials] == list(POLICIES)
    assert "mixed_bfloat16" in choice.describe() and "ms/step" in choice.describe()


def test_choose_precision_skips_non_finite_loss_and_failures():
    def trial(policy: str) -> PrecisionTrial:
        if policy == "mixed_float16":
            raise RuntimeError("no kernel")
        return _timed_trial({"float32": 0.02}, {"mixed_bfloat16": math.nan})(policy)

    choice = choose_precision(POLICIES, trial)
    assert choice.policy == "float32"  # slower, but the only one with a finite loss
    assert "unusable" in choice.describe() and "no kernel" in choice.describe()


def test_cpu_supports_every_policy():
    assert supported_policies() == list(POLICIES)


class Seen(Hook):
    def on_train_end(self, run, logs):
        self.optimizer = type(run.optimizer).__name__
        self.dtypes = {v.dtype for v in run.model.trainable_variables}
        self.policy = run.precision


@pytest.mark.parametrize(
    ("slow", "expected"),
    [("float32,mixed_float16", "mixed_bfloat16"), ("mixed_bfloat16,mixed_float16", "float32")],
)
def test_auto_follows_measurement_in_training(tmp_path, monkeypatch, slow, expected):
    monkeypatch.setenv("SLOW_POLICIES", slow)  # the model sleeps 30 ms per step under these
    data = trainkit.write_data(tmp_path / "data", n=32)
    rf = trainkit.write_runfile(
        tmp_path, data, model="tinymodels:slow_for_policy", max_steps=3, precision="auto"
    )
    seen = Seen()
    result = train(load_config(rf), hooks=[seen], progress=False)
    assert result.precision == expected == seen.policy
    assert "auto ->" in result.precision_detail
    assert seen.dtypes == {"float32"}  # mixed policies keep float32 master weights


def test_mixed_float16_uses_loss_scaling_and_learns(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(
        tmp_path, data, max_steps=40, steps_per_loop=10, precision="mixed_float16"
    )
    seen = Seen()
    losses = []

    class Losses(Hook):
        def on_loop_end(self, run, step, logs):
            losses.append(logs["loss"])

    result = train(load_config(rf), hooks=[seen, Losses()], progress=False)
    assert seen.optimizer == "LossScaleOptimizer"
    assert seen.dtypes == {"float32"}
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    assert result.precision == "mixed_float16"
