"""The system monitor: a real training run logs system/* scalars into its event files;
with monitoring off there is no sampler thread and no system/* tag."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import (
    EventAccumulator,
)

from tfperf.config import config_from_dict
from tfperf.hooks import Hook, RunState
from tfperf.observe.system import THREAD_NAME, SystemMonitorHook, sample_system
from tfperf.train.loop import train


def scalars(logdir: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags()["tensors"]:
        values = [(e.step, tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
        if all(v.size == 1 for _, v in values):  # scalars only (not histograms, graphs)
            out[tag] = [(s, float(v)) for s, v in values]
    return out


def cfg_for(tmp_path: Path, monitor: bool):
    return config_from_dict(
        {
            "data": {"pipeline": "helpers.slow_pipelines:clean"},
            "model": {"name": "helpers.slow_pipelines:tiny_model", "loss": "mse"},
            "pipeline": {"batch_size": 32},
            "train": {
                "out_dir": str(tmp_path / "run"),
                "monitor_system": monitor,
                "steps_per_loop": 1,
                "log_every": 1,
            },
        }
    )


class ThreadSpy(Hook):
    """Records whether the sampler thread is alive while the loop runs."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def on_loop_end(self, run, step, logs) -> None:
        self.seen.append(any(t.name == THREAD_NAME for t in threading.enumerate()))


def test_monitor_tags_appear_in_event_files(tmp_path):
    spy = ThreadSpy()
    result = train(cfg_for(tmp_path, True), hooks=[spy], max_steps=6, progress=False)
    tags = scalars(result.log_dir / "train")
    assert "system/cpu_percent" in tags and "system/ram_used" in tags
    step, ram = tags["system/ram_used"][-1]
    assert ram > 1 and 1 <= step <= 6  # MiB, logged at a training step
    assert all(0 <= v <= 100 * os.cpu_count() for _, v in tags["system/cpu_percent"])
    assert any(spy.seen)
    assert not any(t.name == THREAD_NAME for t in threading.enumerate())  # stopped at the end


def test_monitor_off_costs_nothing(tmp_path):
    spy = ThreadSpy()
    result = train(cfg_for(tmp_path, False), hooks=[spy], max_steps=4, progress=False)
    assert spy.seen and not any(spy.seen)
    assert not [t for t in scalars(result.log_dir / "train") if t.startswith("system/")]


def test_hook_samples_in_background_and_writes_at_the_step(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path / "logs"))
    run = RunState(
        cfg=None,
        model=None,
        optimizer=None,
        strategy=None,
        step=0,
        out_dir=tmp_path,
        train_writer=writer,
        examples_per_step=1,
    )
    hook = SystemMonitorHook(interval_s=0.02)
    hook.on_train_begin(run)
    time.sleep(0.3)
    hook.on_loop_end(run, 7, {})
    written_at_7 = hook.written
    run.step = 9
    hook.on_train_end(run, {})
    writer.flush()
    tags = scalars(tmp_path / "logs")
    assert written_at_7 >= 2  # cpu and ram from the background samples
    assert [s for s, _ in tags["system/cpu_percent"]] == [7, 9]


def test_sample_without_nvml_has_cpu_and_ram():
    s = sample_system(None)
    assert set(s) == {"system/cpu_percent", "system/ram_used"}
