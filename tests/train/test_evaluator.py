"""The separate evaluator on tiny real data: finished-checkpoint discovery, catch-up,
summaries, best/, the FINAL marker, read errors, and the --watch child process."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.checkpoints.folder import (
    CheckpointInfo,
    is_complete,
    read_final,
    ready_checkpoints,
)
from tfperf.train.evaluator import CheckpointMismatchError, evaluate_checkpoint, run_paths
from tfperf.train.evaluator_process import spawn_evaluator
from tfperf.train.watch import plan_catch_up, watch

from helpers import trainkit

N_EVAL = 24
BATCH = 8


# ---- fixtures: tiny shards, a model module and a run file ----------------------------------


def _eval_rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_EVAL, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True).astype("float32")  # a kernel of ones fits exactly
    return x, y


def _write_data(root: Path) -> None:
    import tensorflow as tf

    from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
    from tfperf.data.schema import Feature, Schema

    schema = Schema.of(
        Feature(name="x", dtype="float32", shape=(4,)),
        Feature(name="y", dtype="float32", shape=(1,)),
    )
    root.mkdir(parents=True)
    x, y = _eval_rows()
    shard = root / "eval.tfrecord-00000-of-00001"
    with tf.io.TFRecordWriter(str(shard)) as w:
        for i in range(N_EVAL):
            w.write(schema.encode({"x": x[i], "y": y[i]}, i))
    data = shard.read_bytes()
    info = ShardInfo(
        file=shard.name, records=N_EVAL, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
    )
    split = SplitInfo(shards=[info], records=N_EVAL)
    save_manifest(
        Manifest(name="tiny", schema=schema, splits={"eval": split, "train": split}), root
    )


MODEL_SRC = """
import keras

def build():
    inp = keras.Input((4,), name="x")
    return keras.Model({"x": inp}, keras.layers.Dense(1, name="out")(inp))

def build_other():
    inp = keras.Input((4,), name="x")
    h = keras.layers.Dense(3, name="hidden")(inp)
    return keras.Model({"x": inp}, keras.layers.Dense(1, name="out")(h))
"""


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A run file: label y from tiny shards, a one-Dense model, eval metric mae (min)."""
    _write_data(tmp_path / "data")
    module = f"tiny_eval_model_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(MODEL_SRC)
    runfile = tmp_path / "run.yaml"
    runfile.write_text(
        f"data: {{dir: data, label: y}}\n"
        f"pipeline: {{batch_size: {BATCH}}}\n"
        f"model: {{name: '{module}:build', loss: mse, metrics: [mae]}}\n"
        f"train: {{out_dir: out}}\n"
        f"eval: {{metric: mae, mode: min}}\n"
    )
    return runfile


def _model(cfg):
    from tfperf.util.imports import load_object

    return load_object(
        cfg.model.name, field="model.name", search_dir=str(Path(cfg.source).parent)
    )()


class Saver:
    """Writes checkpoints the way the training loop does (model, optimizer, step)."""

    def __init__(self, cfg, builder=None):
        import keras
        import tensorflow as tf

        from tfperf.train.checkpoints.save import make_checkpoint, make_manager

        self.model = builder() if builder else _model(cfg)
        self.step = tf.Variable(0, dtype=tf.int64)
        opt = keras.optimizers.Adam()
        opt.build(self.model.trainable_variables)
        self.dir = run_paths(cfg)[1]
        self.manager = make_manager(make_checkpoint(self.model, opt, self.step), self.dir, keep=10)

    def save(self, step: int, scale: float) -> str:
        """kernel = scale * ones: scale 1 is a perfect fit (mae 0)."""
        for v in self.model.weights:
            v.assign(np.full(v.shape, scale if len(v.shape) == 2 else 0.0, "float32"))
        self.step.assign(step)
        return self.manager.save(checkpoint_number=step)

    def final(self, step: int, path: str) -> None:
        from tfperf.train.checkpoints.folder import write_final

        write_final(self.dir, step, path)


def _expected(scale: float) -> dict[str, float]:
    x, y = _eval_rows()
    err = scale * x.sum(axis=1, keepdims=True) - y
    return {"loss": float((err**2).mean()), "mae": float(np.abs(err).mean())}


def _results(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "eval_results.jsonl").read_text().splitlines()]


# ---- pure checkpoint discovery ----------------------------------------------------------------


def _touch(p: Path, data: bytes = b"x") -> None:
    p.write_bytes(data)


def test_only_listed_and_complete_checkpoints_are_ready(tmp_path):
    d = tmp_path
    for step in (5, 7):
        _touch(d / f"ckpt-{step}.index")
    _touch(d / "ckpt-5.data-00000-of-00002")
    _touch(d / "ckpt-5.data-00001-of-00002")
    _touch(d / "ckpt-7.data-00000-of-00002")  # one shard of two: still being written
    _touch(d / "ckpt-8.index")  # complete on disk but not listed yet
    _touch(d / "ckpt-8.data-00000-of-00001")
    (d / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-9"\n'
        'all_model_checkpoint_paths: "ckpt-5"\n'
        'all_model_checkpoint_paths: "ckpt-7"\n'
        'all_model_checkpoint_paths: "ckpt-9"\n'  # listed, no files at all
    )
    assert ready_checkpoints(d) == [CheckpointInfo(5, str(d / "ckpt-5"))]
    assert is_complete(d / "ckpt-8") and not is_complete(d / "ckpt-7")
    _touch(d / "ckpt-5.index", b"")  # an empty index is a torn write
    assert ready_checkpoints(d) == []


def test_missing_or_torn_state_and_final(tmp_path):
    assert ready_checkpoints(tmp_path / "nowhere") == []
    (tmp_path / "FINAL").write_text('{"step": 3')  # torn
    assert read_final(tmp_path) is None
    (tmp_path / "FINAL").write_text('{"step": 3, "checkpoint": "rel/ckpt-3"}')
    assert read_final(tmp_path) == CheckpointInfo(3, str(tmp_path / "ckpt-3"))


@pytest.mark.parametrize(
    "steps, last, all_, todo, skipped",
    [
        ([10, 20, 30], -1, False, [30], 2),
        ([10, 20, 30], -1, True, [10, 20, 30], 0),
        ([10, 20, 30], 20, False, [30], 0),
        ([10, 20, 30], 30, False, [], 0),
        ([10, 20, 30, 40], 10, False, [40], 2),
        ([], -1, False, [], 0),
    ],
)
def test_plan_catch_up(steps, last, all_, todo, skipped):
    ready = [CheckpointInfo(s, f"ckpt-{s}") for s in steps]
    got, n = plan_catch_up(ready, last, all_)
    assert [c.step for c in got] == todo and n == skipped


# ---- evaluating with TensorFlow ----------------------------------------------------------------


def test_per_example_reduction_shared_by_train_step_and_evaluator():
    """One value per example whatever the loss returns: a scalar becomes [1], [B] stays,
    [B, ...] is averaged over its non-batch axes (as the evaluator always did)."""
    import tensorflow as tf

    from tfperf.train.objectives import per_example

    assert per_example(tf.constant(2.0)).numpy().tolist() == [2.0]
    assert per_example(tf.constant([1, 3], tf.int32)).numpy().tolist() == [1.0, 3.0]
    x = tf.reshape(tf.range(12, dtype=tf.float64), [2, 3, 2])
    assert per_example(x).dtype == tf.float32
    assert per_example(x).numpy().tolist() == [2.5, 8.5]
    assert per_example(x[:, :, 0]).numpy().tolist() == [2.0, 8.0]


def test_evaluate_checkpoint_matches_numpy(run):
    cfg = load_config(run)
    saver = Saver(cfg)
    p_half = saver.save(10, 0.5)
    p_one = saver.save(20, 1.0)
    got = evaluate_checkpoint(cfg, p_half)
    want = _expected(0.5)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-5)
    assert evaluate_checkpoint(cfg, p_one)["mae"] == pytest.approx(0.0, abs=1e-5)
    # A folder means its newest finished checkpoint.
    assert evaluate_checkpoint(cfg, str(saver.dir))["mae"] == pytest.approx(0.0, abs=1e-5)


def test_checkpoint_of_another_model_is_a_clear_error(run):
    cfg = load_config(run)
    other = Saver(cfg, builder=lambda: _other_model(cfg))
    path = other.save(5, 1.0)
    with pytest.raises(CheckpointMismatchError, match="does not fit the model"):
        evaluate_checkpoint(cfg, path)


def _other_model(cfg):
    from tfperf.util.imports import load_object

    name = cfg.model.name.replace(":build", ":build_other")
    return load_object(name, field="model.name", search_dir=str(Path(cfg.source).parent))()


def test_watch_all_sees_every_checkpoint_writes_summaries_and_best(run):
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = load_config(run)
    saver = Saver(cfg)
    scales = {10: 0.2, 20: 0.9, 30: 0.6}  # step 20 is the best by mae
    for step, scale in scales.items():
        last = saver.save(step, scale)
    saver.final(30, last)
    records = watch(cfg, all_checkpoints=True, poll=0.1, timeout=60)
    assert [r.step for r in records] == [10, 20, 30]
    assert [r.skipped for r in records] == [0, 0, 0]
    for r in records:
        assert r.metrics["mae"] == pytest.approx(_expected(scales[r.step])["mae"], rel=1e-5)
        assert r.examples == N_EVAL
    assert [r.best for r in records] == [True, True, False]

    out = run.parent / "out"
    assert [r["step"] for r in _results(out)] == [10, 20, 30]
    best = json.loads((out / "best" / "best.json").read_text())
    assert (best["metric"], best["step"]) == ("mae", 20)
    assert best["value"] == pytest.approx(_expected(0.9)["mae"], rel=1e-5)
    assert (out / "best" / "ckpt-20.index").exists()
    # best/ is a checkpoint of its own: it evaluates to the recorded value.
    assert evaluate_checkpoint(cfg, str(out / "best"))["mae"] == pytest.approx(best["value"])

    acc = EventAccumulator(str(out / "logs" / "eval"))
    acc.Reload()
    assert {"loss", "mae"} <= set(acc.Tags()["tensors"])  # training's tags, in logs/eval
    events = acc.Tensors("mae")
    assert [e.step for e in events] == [10, 20, 30]
    for e in events:
        value = float(tf.make_ndarray(e.tensor_proto))
        assert value == pytest.approx(_expected(scales[e.step])["mae"], rel=1e-5)

    # A restarted evaluator does not redo what eval_results.jsonl already holds.
    assert watch(cfg, all_checkpoints=True, poll=0.1, timeout=30) == []


def test_backlog_evaluates_newest_and_counts_skipped(run, capsys):
    cfg = load_config(run)
    saver = Saver(cfg)
    for step in (10, 20, 30, 40):
        last = saver.save(step, 1.0 - step / 100)
    saver.final(40, last)
    records = watch(cfg, poll=0.1, timeout=60)
    assert [(r.step, r.skipped) for r in records] == [(40, 3)]
    assert "skipped 3" in capsys.readouterr().err
    assert json.loads((run.parent / "out" / "best" / "best.json").read_text())["step"] == 40


def test_half_written_and_unreadable_checkpoints_never_crash_it(run, capsys):
    cfg = load_config(run)
    saver = Saver(cfg)
    saver.save(10, 0.5)
    d = saver.dir
    # ckpt-20: an index but no data yet; ckpt-30: listed but absent; ckpt-25: complete on
    # disk but garbage (a read error, retried then given up).
    (d / "ckpt-20.index").write_bytes(b"\0" * 16)
    (d / "ckpt-25.index").write_bytes(b"not a checkpoint index")
    (d / "ckpt-25.data-00000-of-00001").write_bytes(b"junk")
    state = (d / "checkpoint").read_text()
    for step in (20, 25, 30):
        state += f'all_model_checkpoint_paths: "ckpt-{step}"\n'
    (d / "checkpoint").write_text(state.replace('"ckpt-10"\nall', '"ckpt-30"\nall', 1))
    records = watch(cfg, all_checkpoints=True, poll=0.05, timeout=4)
    assert [r.step for r in records] == [10]
    err = capsys.readouterr().err
    assert "will retry" in err and "giving up on" in err and "ckpt-25" in err
    assert "ckpt-20" not in err and "ckpt-30" not in err  # never even tried
    # Once ckpt-20 is whole and FINAL names it, the evaluator takes it and stops.
    (d / "ckpt-20.index").unlink()
    path = saver.save(20, 1.0)
    saver.final(20, path)
    records = watch(cfg, all_checkpoints=True, poll=0.05, timeout=60)
    assert [r.step for r in records] == [20]
    assert records[0].metrics["mae"] == pytest.approx(0.0, abs=1e-5)


def test_unknown_eval_metric_names_the_field(run):
    cfg = load_config(run, ["eval.metric=accuracy"])
    saver = Saver(cfg)
    saver.final(10, saver.save(10, 1.0))
    with pytest.raises(UserError, match=r"eval.metric: expected one of \['loss', 'mae'\]"):
        watch(cfg, poll=0.1, timeout=30)
    assert not (run.parent / "out" / "eval_results.jsonl").exists()
    assert not (run.parent / "out" / "best").exists()


# ---- real processes --------------------------------------------------------------------------


def _wait_for(predicate, seconds: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None, "the evaluator exited early"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_spawned_watcher_follows_training_and_exits_after_final(run):
    cfg = load_config(run, ["eval.mode=max"])  # max mae: the worst fit is best here
    out = run.parent / "out"
    proc = spawn_evaluator(str(run), ["eval.mode=max"])
    try:
        saver = Saver(cfg)
        # The child's Evaluator is built once it creates logs/eval.
        _wait_for(lambda: (out / "logs" / "eval").exists(), 90, proc)
        saver.save(10, 0.9)
        _wait_for(lambda: (out / "eval_results.jsonl").exists(), 60, proc)
        saver.save(20, 0.0)
        saver.final(30, saver.save(30, 0.5))
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    steps = [r["step"] for r in _results(out)]
    assert steps[0] == 10 and steps[-1] == 30  # 20 may be skipped when it fell behind
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["mode"] == "max" and best["step"] == (20 if 20 in steps else 30)
    log = (out / "logs" / "evaluator.log").read_text()
    assert "step 30" in log and "Traceback" not in log


def test_cli_once_json_and_watch_all(run):
    cfg = load_config(run)
    saver = Saver(cfg)
    saver.save(10, 0.5)
    saver.final(20, saver.save(20, 1.0))
    base = ("evaluate", run)  # the command line in this process: no TensorFlow start-up
    once = trainkit.tfperf_here(*base, "--checkpoint", saver.dir / "ckpt-10", "--json")
    got = json.loads(once.stdout)
    assert got["step"] == 10
    assert got["metrics"]["mae"] == pytest.approx(_expected(0.5)["mae"], rel=1e-5)
    assert not (run.parent / "out" / "eval_results.jsonl").exists()  # one-shot writes nothing
    watched = trainkit.tfperf_here(*base, "--watch", "--all", "--poll", "0.1", "--json")
    assert [r["step"] for r in json.loads(watched.stdout)] == [10, 20]


def test_cli_user_errors_exit_2_without_traceback(run, tmp_path):
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["evaluate", str(run)])
    assert res.exit_code == 2
    assert "no finished checkpoint yet" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["evaluate", str(run), "--watch", "--checkpoint", "x"])
    assert res.exit_code == 2 and "--checkpoint" in res.output


def test_real_training_with_the_evaluator(run):
    """`tfperf train --evaluator`: the child follows the loop's checkpoints to FINAL."""
    sets = []
    for item in (
        "model.metrics=[]",
        "eval.metric=loss",
        "train.checkpoint.every_steps=5",
        "pipeline.shuffle_buffer=16",
    ):
        sets += ["--set", item]
    # The trainer in this process (no TensorFlow start-up), its evaluator a child process.
    args = ("train", run, "--evaluator", "--max-steps", "20", "--no-progress", "--json")
    trainkit.tfperf_here(*args, *sets)
    out = run.parent / "out"
    results = _results(out)
    assert results[-1]["step"] == 20  # the FINAL checkpoint is always evaluated
    assert all(r["skipped"] >= 0 for r in results)
    assert "Traceback" not in (out / "logs" / "evaluator.log").read_text()
    cfg = load_config(run, ["model.metrics=[]", "eval.metric=loss"])
    again = evaluate_checkpoint(cfg, str(out / "checkpoints" / "ckpt-20"))
    assert again["loss"] == pytest.approx(results[-1]["metrics"]["loss"], rel=1e-5)
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["value"] == min(r["metrics"]["loss"] for r in results)


def test_cli_all_without_watch_evaluates_every_checkpoint_on_disk(run):
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    cfg = load_config(run)
    saver = Saver(cfg)
    for step, scale in ((10, 0.5), (20, 1.0)):
        saver.save(step, scale)
    res = CliRunner().invoke(app, ["evaluate", str(run), "--all", "--json", "--max-steps", "1"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["step"] for r in rows] == [10, 20]
    assert [r["examples"] for r in rows] == [BATCH, BATCH]  # --max-steps 1: one batch each


def test_watcher_exits_when_its_trainer_dies(run, tmp_path):
    """A trainer killed without FINAL must not leave its evaluator behind."""
    import psutil

    code = (
        "import sys; from tfperf.train.evaluator_process import spawn_evaluator; "
        f"p = spawn_evaluator({str(run)!r}, ['train.out_dir=out']); print(p.pid)"
    )
    parent = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    child = psutil.Process(int(parent.stdout.strip()))
    deadline = time.monotonic() + 90
    while child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the evaluator outlived its trainer"
        time.sleep(0.2)
    log = (run.parent / "out" / "logs" / "evaluator.log").read_text()
    assert "exited without FINAL" in log


def test_final_naming_a_missing_checkpoint_ends_the_watch(run, capsys):
    cfg = load_config(run)
    saver = Saver(cfg)
    saver.save(10, 1.0)
    saver.final(20, str(saver.dir / "ckpt-20"))  # never written (e.g. deleted by hand)
    records = watch(cfg, poll=0.05, timeout=60)
    assert [r.step for r in records] == [10]
    assert "not on disk" in capsys.readouterr().err
