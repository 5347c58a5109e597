"""Fixtures of the training tests: `eval_run`, a run file over tiny shards whose label a
one-Dense model fits exactly (a kernel of ones), the checkpoints of that model written as
the training loop writes them, and the metrics numpy expects of them (for the evaluator, the
watching evaluator and its process)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

N_EVAL = 24  # examples of the eval split (the train split is the same shard)
BATCH = 8

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


class Saver:
    """Writes checkpoints the way the training loop does (model, optimizer, step)."""

    def __init__(self, cfg: Any, builder: str = "build"):
        import keras
        import tensorflow as tf

        from tfperf.train.checkpoints.folder import run_dirs
        from tfperf.train.checkpoints.save import make_checkpoint, make_manager
        from tfperf.util.imports import load_object

        name = cfg.model.name.replace(":build", f":{builder}")
        here = str(Path(cfg.source).parent)
        self.model = load_object(name, field="model.name", search_dir=here)()
        self.step = tf.Variable(0, dtype=tf.int64)
        opt = keras.optimizers.Adam()
        opt.build(self.model.trainable_variables)
        self.dir = run_dirs(cfg).checkpoint_dir
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


class EvalRun:
    """The run file (label y, a one-Dense model, loss mse, metric mae, eval.metric mae min,
    train.out_dir out) and what tests read of its run."""

    n_eval = N_EVAL
    batch = BATCH

    def __init__(self, runfile: Path):
        self.runfile = runfile
        self.out = runfile.parent / "out"

    def saver(self, cfg: Any, builder: str = "build") -> Saver:
        """Checkpoints of the run file's model (builder "build_other": a model they do not
        fit)."""
        return Saver(cfg, builder)

    @staticmethod
    def expected(scale: float) -> dict[str, float]:
        """The eval split's loss and mae for a kernel of `scale`s, in numpy."""
        x, y = _eval_rows()
        err = scale * x.sum(axis=1, keepdims=True) - y
        return {"loss": float((err**2).mean()), "mae": float(np.abs(err).mean())}

    def results(self) -> list[dict]:
        """The lines of out/eval_results.jsonl."""
        lines = (self.out / "eval_results.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


@pytest.fixture
def eval_run(tmp_path: Path) -> EvalRun:
    """A run file over tiny shards in tmp_path, its model in a module of its own."""
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
    return EvalRun(runfile)
