"""observe/summaries.py: the SummaryHook writes real event files: scalars when a call crosses
a multiple of log_every (and at the end), under the evaluator's tags (metrics/ dropped,
bookkeeping keys left out), histograms of the trainable variables when a call crosses
histogram_every (and at the end); a no-op writer writes nothing."""

from __future__ import annotations

from types import SimpleNamespace

import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator as ea

from tfperf.observe.summaries import SummaryHook, make_writer, tag, write_scalars
from tfperf.runreport.events import read_scalars


def _histogram_steps(log_dir) -> dict[str, list[int]]:
    acc = ea.EventAccumulator(str(log_dir), size_guidance={ea.TENSORS: 0})
    acc.Reload()
    return {
        t: [e.step for e in acc.Tensors(t)]
        for t in acc.Tags()["tensors"]
        if t.startswith("weights/")
    }


def test_the_evaluators_tags():
    assert tag("metrics/accuracy") == "accuracy"
    assert tag("input/wait_ms") == "input/wait_ms" and tag("learning_rate") == "learning_rate"


def test_scalars_and_histograms_when_a_call_crosses_their_period(tmp_path):
    kernel = tf.Variable(tf.ones([2, 2]), name="kernel")
    run = SimpleNamespace(
        train_writer=make_writer(tmp_path),
        model=SimpleNamespace(trainable_variables=[kernel]),
        train_step=None,
        iterator=None,
        step=0,
    )
    hook = SummaryHook(log_every=5, histogram_every=10)
    for first, step in ((1, 4), (5, 8), (9, 12)):  # calls of 4 steps each
        logs = {"loss": 1.0 / step, "metrics/accuracy": step / 20, "first_step": first, "steps": 4}
        hook.on_loop_end(run, step, logs)
    run.step = 13
    hook.on_train_end(run, {"loss": 0.05})
    scalars = read_scalars(tmp_path)
    assert [s for s, _ in scalars["loss"]] == [8, 12, 13]
    assert [s for s, _ in scalars["accuracy"]] == [8, 12]
    assert "first_step" not in scalars and "steps" not in scalars
    assert _histogram_steps(tmp_path) == {"weights/kernel:0": [12, 13]}


def test_none_values_and_a_noop_writer_write_nothing(tmp_path):
    writer = make_writer(tmp_path / "a")
    write_scalars(writer, 1, {"loss": 0.5, "lr": None})
    writer.flush()
    assert list(read_scalars(tmp_path / "a")) == ["loss"]
    write_scalars(make_writer(tmp_path / "b", enabled=False), 1, {"loss": 0.5})
    assert not (tmp_path / "b").exists()
