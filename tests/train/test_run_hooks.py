"""The loop's own hooks (train/run_hooks.py): the NaN check marks the run diverged at the
first non-finite loss, naming the steps of that call; the progress bar shows the global
step over the target with the loss and the mean rate, and no bar for a run resumed at its
target."""

from __future__ import annotations

import math

import pytest

from tfperf.train.run_hooks import NanCheck, ProgressHook

from helpers import trainkit


@pytest.mark.parametrize("loss", [math.nan, math.inf, -math.inf])
def test_a_non_finite_loss_stops_the_run_naming_its_steps(loss):
    run, check = trainkit.run_state(), NanCheck()
    check.on_loop_end(run, 10, {"loss": 0.7, "first_step": 6})
    check.on_loop_end(run, 12, {})  # no loss reported
    assert run.stop_reason is None
    check.on_loop_end(run, 15, {"loss": loss, "first_step": 11})
    assert run.stop_reason == "nan"
    assert run.nan_message.startswith(f"loss is {loss} in the loop call covering steps 11-15;")
    check.on_loop_end(run, 20, {"loss": loss, "first_step": 16})
    assert "steps 11-15" in run.nan_message  # the first one is named


def test_the_bar_shows_the_global_step_loss_and_mean_rate(capsys):
    run, hook = trainkit.run_state(step=4), ProgressHook(total=10)  # resumed at step 4
    hook.on_train_begin(run)
    assert hook.bar is not None and hook.bar.enabled
    run.examples_per_sec = 1234.0
    hook.on_loop_end(run, 8, {"loss": 0.123456})
    hook.on_train_end(run, {})
    assert hook.bar is None
    err = capsys.readouterr().err
    assert "train" in err and "8/10" in err
    assert "loss 0.1235" in err and "1,234 ex/s mean" in err


def test_no_bar_for_a_run_resumed_at_its_target(capsys):
    run, hook = trainkit.run_state(step=10), ProgressHook(total=10)
    hook.on_train_begin(run)
    assert hook.bar is None
    hook.on_loop_end(run, 10, {"loss": 0.5})
    hook.on_train_end(run, {})
    assert capsys.readouterr().err == ""
