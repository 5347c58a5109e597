"""The training loop (train/loop.py) on tiny real data: the steps of each call, loss goes
down, a NaN loss stops with the steps named, compiled models supply loss and optimizer, and
`tfperf train` works end to end (JSON, checkpoints, FINAL, automatic resume)."""

from __future__ import annotations

import json
import math

import pytest

from tfperf.config import load_config
from tfperf.hooks import Hook, NonFiniteLossError
from tfperf.train.loop import auto_steps_per_loop, plan_call_steps, train

from helpers import trainkit


@pytest.mark.parametrize(
    ("step", "spl", "target", "every", "expected"),
    [
        (0, 10, 100, None, 10),
        (95, 10, 100, None, 5),  # cut at the target
        (0, 10, None, 4, 4),  # cut at the checkpoint boundary
        (5, 10, 100, 4, 3),  # 5 -> 8
        (8, 1, 100, 4, 1),
    ],
)
def test_plan_call_steps(step, spl, target, every, expected):
    assert plan_call_steps(step, spl, target, every) == expected


def test_auto_steps_per_loop():
    assert auto_steps_per_loop(0.01) == 30
    assert auto_steps_per_loop(10.0) == 1
    assert auto_steps_per_loop(1e-9) == 1000


class Recorder(Hook):
    def __init__(self):
        self.events = []

    def on_train_begin(self, run):
        self.events.append(("begin", run.step, run.examples_per_step))

    def on_loop_begin(self, run, step):
        self.events.append(("loop_begin", step))

    def on_loop_end(self, run, step, logs):
        self.events.append(("loop_end", step, logs["loss"]))

    def on_train_end(self, run, logs):
        self.events.append(("end", run.step, run.stop_reason))


def test_loss_decreases_and_hooks_see_every_call(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=60, steps_per_loop=5)
    rec = Recorder()
    result = train(load_config(rf), hooks=[rec], progress=False)
    losses = [e[2] for e in rec.events if e[0] == "loop_end"]
    assert result.steps == 60 and result.stopped_because == "max_steps"
    assert len(losses) == 12  # 60 steps / 5 per call
    assert sum(losses[-3:]) / 3 < 0.6 * sum(losses[:3]) / 3
    assert rec.events[0] == ("begin", 0, 8)
    assert rec.events[-1] == ("end", 60, "max_steps")
    assert [e[1] for e in rec.events if e[0] == "loop_begin"][:3] == [0, 5, 10]
    assert result.examples_per_sec > 0 and 0 <= result.input_bound_fraction <= 1
    final = json.loads((result.checkpoint_dir / "FINAL").read_text())
    assert final["step"] == 60 and final["checkpoint"].endswith("ckpt-60")
    assert result.pipeline is not None and result.pipeline.stages[0].name.startswith("Prefetch")


def test_nan_loss_stops_naming_the_steps_and_keeps_the_last_good_checkpoint(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(
        tmp_path,
        data,
        model="tinymodels:exploding",
        max_steps=40,
        steps_per_loop=2,
        checkpoint={"every_steps": 2},
    )
    cfg = load_config(rf, ["model.loss=mse", "model.optimizer=sgd", "model.learning_rate=1e18"])
    with pytest.raises(NonFiniteLossError, match=r"steps \d+-\d+") as err:
        train(cfg, progress=False)
    first, last = (int(s) for s in str(err.value).split("steps ")[1].split(";")[0].split("-"))
    ckpts = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*.index"))
    saved = [int(p.name.split("-")[1].split(".")[0]) for p in ckpts]
    assert all(s < first for s in saved)  # no diverged state was saved
    assert not (tmp_path / "run" / "checkpoints" / "FINAL").exists()
    assert last - first == 1


def test_compiled_model_supplies_loss_and_optimizer(tmp_path):
    import yaml

    data = trainkit.write_data(tmp_path / "data", n=32)
    rf = trainkit.write_runfile(tmp_path, data, model="tinymodels:tiny_compiled", max_steps=4)
    doc = yaml.safe_load(rf.read_text())
    del doc["model"]["loss"], doc["model"]["learning_rate"]
    doc["model"]["metrics"] = ["binary_accuracy"]
    rf.write_text(yaml.safe_dump(doc))
    seen = {}

    class Grab(Hook):
        def on_train_end(self, run, logs):
            seen["opt"] = type(run.optimizer).__name__
            seen["lr"] = float(run.optimizer.learning_rate)

    result = train(load_config(rf), hooks=[Grab()], progress=False)
    assert seen == {"opt": "SGD", "lr": pytest.approx(0.05)}
    assert math.isfinite(result.final_loss)
    assert 0.0 <= result.metrics["metrics/binary_accuracy"] <= 1.0


def test_cli_train_end_to_end_then_resume(tmp_path, cli, capfd):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(tmp_path, data, epochs=2, checkpoint={"every_steps": 4})
    capfd.readouterr()
    res = cli(
        "train",
        rf,
        "--json",
        "--set",
        "pipeline.batch_size=16",
        "--print-tensors",
        "hidden,loss",
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # In-graph prints (TensorFlow's C++ writes them to fd 2) for the first print_steps (3).
    printed = capfd.readouterr().err
    assert "step 1 hidden [[" in printed and "step 3 loss" in printed
    assert "step 4 loss" not in printed
    assert out["steps"] == 8 and out["stopped_because"] == "epochs"  # 2 x 64/16
    assert out["global_batch"] == 16 and out["restored_from"] is None
    ckpt_dir = tmp_path / "run" / "checkpoints"
    assert {p.name for p in ckpt_dir.glob("ckpt-*.index")} == {"ckpt-4.index", "ckpt-8.index"}
    assert json.loads((ckpt_dir / "FINAL").read_text())["step"] == 8
    # A longer run resumes from step 8 and says so.
    res = cli("train", rf, "--max-steps", "10", "--json", "--set", "pipeline.batch_size=16")
    assert res.exit_code == 0, res.output
    assert "resumed from" in res.stderr and "ckpt-8" in res.stderr
    out = json.loads(res.stdout)
    assert out["start_step"] == 8 and out["steps"] == 10 and out["restored_from"].endswith("ckpt-8")
    assert json.loads((ckpt_dir / "FINAL").read_text())["step"] == 10


def test_cli_errors_are_one_line(tmp_path, cli):
    data = trainkit.write_data(tmp_path / "data", n=16)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=2)
    res = cli("train", rf, "--set", "model.loss=nope")  # raises on anything but an exit
    assert res.exit_code == 2
    assert "model.loss" in res.stderr and "nope" in res.stderr
    assert "Traceback" not in res.stderr
    res = cli("train", rf, "--print-tensors", "nolayer")
    assert res.exit_code == 2 and "no layer 'nolayer'" in res.stderr


def test_max_time_stops_training(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(tmp_path, data, max_time=1.0, steps_per_loop=2)
    result = train(load_config(rf), progress=False)
    assert result.stopped_because == "max_time" and result.steps > 0
    assert json.loads((result.checkpoint_dir / "FINAL").read_text())["step"] == result.steps


def test_init_from_warm_starts_and_freezes_before_the_optimizer_is_built(tmp_path):
    import numpy as np

    data = trainkit.write_data(tmp_path / "data", n=64)
    kernels = {}

    class Grab(Hook):
        def __init__(self, key):
            self.key = key

        def on_train_begin(self, run):
            kernels[self.key + "_begin"] = run.model.get_layer("hidden").kernel.numpy().copy()

        def on_train_end(self, run, logs):
            kernels[self.key + "_end"] = run.model.get_layer("hidden").kernel.numpy().copy()
            kernels[self.key + "_trainable"] = len(run.model.trainable_variables)

    (tmp_path / "a").mkdir()
    first = trainkit.write_runfile(tmp_path / "a", data, max_steps=6)
    a = train(load_config(first), hooks=[Grab("a")], progress=False)
    (tmp_path / "b").mkdir()
    second = trainkit.write_runfile(
        tmp_path / "b", data, max_steps=6, init_from=str(a.checkpoint), freeze=["hidden"]
    )
    train(load_config(second), hooks=[Grab("b")], progress=False)
    np.testing.assert_array_equal(kernels["b_begin"], kernels["a_end"])  # warm-started
    np.testing.assert_array_equal(kernels["b_end"], kernels["b_begin"])  # frozen: unchanged
    assert kernels["a_trainable"] == 4 and kernels["b_trainable"] == 2  # only the logit trains


def test_max_steps_after_a_resume_counts_global_steps(tmp_path, capsys):
    """The bar's N/M is the global step reached over the target global step after a resume;
    a target already reached trains nothing and says so (no "8/6" bar)."""
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=4, steps_per_loop=2)
    train(load_config(rf), progress=False)
    capsys.readouterr()
    resumed = train(load_config(rf), max_steps=8, progress=True)
    err = capsys.readouterr().err
    assert resumed.start_step == 4 and resumed.steps == 8
    assert "resumed from" in err and "8/8" in err
    again = train(load_config(rf), max_steps=6, progress=True)
    err = capsys.readouterr().err
    assert again.start_step == again.steps == 8
    assert "already at step 8 (target 6, max_steps): nothing to train" in err
    assert "8/6" not in err
