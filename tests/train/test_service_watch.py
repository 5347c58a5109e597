"""Training through the tf.data service, watched (train/service_watch.py), without a
service: a call's input wait far above the usual is a logged pause (never the first call,
which waits for the job to start); each distributed_epoch epoch's examples, counted by a
real EpochCounter on a local pipeline, against the split's size, its loss logged and written
to TensorBoard; the --json entry and the summary line in each mode."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.config import load_config
from tfperf.hooks import RunState
from tfperf.inputs.epoch_count import EpochCounter
from tfperf.train.service_watch import PARALLEL_NOTE, ServiceWatch, service_watch

from helpers import trainkit

ADDRESS = "grpc://127.0.0.1:5050"  # never connected to


@pytest.fixture(scope="module")
def runfile(tmp_path_factory):
    root = tmp_path_factory.mktemp("service_watch")
    data = trainkit.write_data(root / "data", n=64, shards=2)
    return str(trainkit.write_runfile(root, data))


def _cfg(runfile, mode: str):
    sets = [f"pipeline.service.address={ADDRESS}", f"pipeline.service.mode={mode}"]
    return load_config(runfile, sets)


def _call(watch: ServiceWatch, run: RunState, step: int, wait_s: float, steps: int = 4) -> None:
    run.step = step
    watch.on_loop_end(run, step, {"input/wait_ms": wait_s * 1e3 / steps, "steps": steps})


def test_a_long_input_wait_is_a_logged_pause(runfile, tmp_path, capsys):
    watch = ServiceWatch(_cfg(runfile, "parallel_epochs"), None, None)
    run = trainkit.run_state(tmp_path, logs=True)
    _call(watch, run, 4, 20.0)  # the first call waits for the job to start: no pause
    for step in (8, 12, 16):
        _call(watch, run, step, 0.02)
    _call(watch, run, 20, 2.5)  # short of 3 s: no pause
    _call(watch, run, 24, 6.0)
    assert watch.pauses == [{"step": 24, "seconds": 6.0}]
    err = capsys.readouterr().err
    assert (
        f"input paused 6.0 s before step 24: no batch from the tf.data service at {ADDRESS}" in err
    )
    report = watch.report()
    assert (report["lost"], report["epochs"], report["note"]) == (0, [], PARALLEL_NOTE)
    assert watch.summary() == f"parallel_epochs at {ADDRESS}: {PARALLEL_NOTE}; 1 input pause(s)"


def _epoch(counter: EpochCounter, examples: int) -> None:
    """One service epoch of `examples` read through the counter, in batches of 8."""
    ds = tf.data.Dataset.range(examples).batch(8)
    for _ in counter.counted(ds, batched=True):
        pass


def test_each_distributed_epoch_is_counted_against_the_split(runfile, tmp_path, capsys):
    counter = EpochCounter()
    watch = service_watch(_cfg(runfile, "distributed_epoch"), counter)
    assert watch.expected == 64  # the train split's records
    run = trainkit.run_state(tmp_path, logs=True)
    _epoch(counter, 64)
    _call(watch, run, 8, 0.01)
    _epoch(counter, 40)  # a worker lost mid-epoch
    _call(watch, run, 16, 0.01)
    assert watch.epochs == [
        {"epoch": 1, "received": 64, "lost": 0},
        {"epoch": 2, "received": 40, "lost": 24},
    ]
    assert "service epoch 2: received 40 of 64 examples, 24 lost" in capsys.readouterr().err
    assert watch.report()["lost"] == 24
    summary = f"distributed_epoch at {ADDRESS}: 24 example(s) lost in 2 epoch(s) counted"
    assert watch.summary() == summary
    run.train_writer.flush()
    assert list((tmp_path / "logs").glob("events.out.tfevents.*"))  # input/service_lost


def test_without_a_counter_nothing_is_counted(runfile):
    watch = service_watch(_cfg(runfile, "distributed_epoch"), None)
    report = watch.report()
    assert report["lost"] is None and report["note"].startswith("not counted")
    assert watch.summary().startswith(f"distributed_epoch at {ADDRESS}: not counted")
