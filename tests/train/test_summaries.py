"""TensorBoard output read back with tensorboard's EventAccumulator: scalars (loss,
learning rate, examples/s, step time, input/*), weight histograms and the graph; and the
reading of tf.data's pipeline model (observe/feed.py) on a real iterator."""

from __future__ import annotations

import pytest

from tfperf.config import load_config
from tfperf.train.loop import train

from helpers import trainkit


def _events(path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path), size_guidance={"tensors": 0, "histograms": 0})
    acc.Reload()
    return acc


def test_train_writes_scalars_histograms_and_graph(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=12, steps_per_loop=3, histogram_every=6)
    cfg = load_config(
        rf, ["model.lr_schedule=cosine", "model.warmup_steps=2", "model.metrics=[binary_accuracy]"]
    )
    result = train(cfg, progress=False)
    acc = _events(result.log_dir / "train")
    tags = set(acc.Tags()["tensors"])  # TF2 summaries are stored as tensors
    expected = {
        "loss",
        "learning_rate",
        "step/examples_per_sec",
        "step/time_ms",
        "input/wait_ms",
        "input/wait_fraction",
        "input/buffered",
        "binary_accuracy",  # metrics under their own names, as the evaluator writes them
    }
    assert expected <= tags, expected - tags
    assert not any(t.startswith(("metrics/", "eval/")) for t in tags)
    assert any(t.startswith("input/stage_us/") for t in tags)
    loss_steps = [e.step for e in acc.Tensors("loss")]
    assert loss_steps == [3, 6, 9, 12]  # every call (log_every=1), at the call's last step
    hist = [t for t in tags if t.startswith("weights/")]
    assert {"weights/hidden/kernel", "weights/logit/bias"} <= set(hist)
    assert [e.step for e in acc.Tensors("weights/hidden/kernel")] == [6, 12]
    assert acc.Graph() is not None  # the train function's op graph, written once
    from tensorboard.util.tensor_util import make_ndarray

    lrs = [float(make_ndarray(e.tensor_proto)) for e in acc.Tensors("learning_rate")]
    assert lrs[0] > lrs[-1]  # cosine decay after warm-up


def test_auto_steps_per_loop_still_logs_every_log_every_steps(tmp_path):
    """steps_per_loop: auto sizes calls for speed (up to 1000 steps); they are cut at
    multiples of log_every so that TensorBoard gets a point every log_every steps."""
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(
        tmp_path, data, max_steps=60, log_every=10, steps_per_loop="auto", histogram_every=60
    )
    result = train(load_config(rf), progress=False)
    loss_steps = [e.step for e in _events(result.log_dir / "train").Tensors("loss")]
    assert loss_steps == [10, 20, 30, 40, 50, 60]


def test_training_and_evaluation_share_tags_in_their_own_run_folders(tmp_path):
    """logs/train and logs/eval hold the same tags (loss, accuracy), as Keras writes them,
    so that TensorBoard draws training and evaluation on one chart."""
    from tfperf.train.watch import watch

    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=4)
    cfg = load_config(rf, ["model.metrics=[binary_accuracy]", "data.eval_split=train"])
    result = train(cfg, progress=False)
    watch(cfg, poll=0.1, timeout=60)
    train_tags = set(_events(result.log_dir / "train").Tags()["tensors"])
    eval_tags = set(_events(result.log_dir / "eval").Tags()["tensors"])
    assert eval_tags == {"loss", "binary_accuracy"}
    assert eval_tags <= train_tags


def test_pipeline_snapshot_reads_tf_data_model():
    import tensorflow as tf

    from tfperf.observe.feed import pipeline_snapshot

    ds = tf.data.Dataset.range(400).batch(4).map(lambda x: x * 2, num_parallel_calls=2)
    opts = tf.data.Options()
    opts.autotune.enabled = True
    it = iter(ds.prefetch(3).with_options(opts))
    for _ in range(20):
        next(it)
    snap = pipeline_snapshot(it)
    assert snap is not None
    names = [s.name for s in snap.stages]
    assert names[0] == "Prefetch" and "ParallelMapV2" in names and names[-1] == "Range"
    assert snap.buffer_size == pytest.approx(3)
    assert 0 <= snap.buffered <= 3
    par = next(s for s in snap.stages if s.name == "ParallelMapV2").parallelism
    assert par == pytest.approx(2)
