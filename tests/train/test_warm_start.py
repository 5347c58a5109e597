"""Warm start: layers shared by name load their values, the rest is reported, freeze holds."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfperf.train.warm_start import WarmStartError, freeze_layers, warm_start


def _model(units: dict[str, int], seed: int) -> keras.Model:
    """x(4) -> dense layers named and sized by `units`, in order."""
    keras.utils.set_random_seed(seed)
    inp = keras.Input((4,), name="x")
    h = inp
    for name, n in units.items():
        h = keras.layers.Dense(n, name=name)(h)
    return keras.Model(inp, h)


def source_model() -> keras.Model:
    return _model({"A": 3, "B": 5, "C": 1}, seed=1)


def new_model() -> keras.Model:
    return _model({"A": 3, "B": 7, "D": 1}, seed=2)


def _save(model: keras.Model, kind: str, tmp_path) -> str:
    if kind == "weights.h5":
        path = tmp_path / "src.weights.h5"
        model.save_weights(path)
        return str(path)
    if kind == "keras":
        path = tmp_path / "src.keras"
        model.save(path)
        return str(path)
    if kind == "legacy.h5":
        path = tmp_path / "src.h5"
        model.save(path)  # Keras 2's HDF5 format
        return str(path)
    # The loop's layout: run_dir/checkpoints/ckpt-N with model, optimizer and step.
    step = tf.Variable(12, dtype=tf.int64)
    opt = keras.optimizers.Adam()
    opt.build(model.trainable_variables)
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt, step=step)
    manager = tf.train.CheckpointManager(ckpt, str(tmp_path / "run" / "checkpoints"), 3)
    prefix = manager.save(checkpoint_number=12)
    return {
        "ckpt_prefix": prefix,
        "ckpt_dir": str(tmp_path / "run" / "checkpoints"),
        "run_dir": str(tmp_path / "run"),
    }[kind]


@pytest.mark.parametrize(
    "kind", ["ckpt_prefix", "ckpt_dir", "run_dir", "weights.h5", "keras", "legacy.h5"]
)
def test_report_and_values(kind, tmp_path):
    src = source_model()
    path = _save(src, kind, tmp_path)
    new = new_model()
    b_before = new.get_layer("B").kernel.numpy().copy()
    d_before = new.get_layer("D").kernel.numpy().copy()
    report = warm_start(new, path)
    assert report.loaded == ["A"]
    assert report.missing == ["D"]
    assert report.unused == ["C"]
    assert len(report.mismatched) == 1
    mm = report.mismatched[0]
    assert mm.layer == "B"
    assert mm.source_shapes == [(3, 5), (5,)]
    assert mm.model_shapes == [(3, 7), (7,)]
    np.testing.assert_array_equal(
        new.get_layer("A").kernel.numpy(), src.get_layer("A").kernel.numpy()
    )
    np.testing.assert_array_equal(new.get_layer("A").bias.numpy(), src.get_layer("A").bias.numpy())
    # Layers that were not loaded keep their own initial values.
    np.testing.assert_array_equal(new.get_layer("B").kernel.numpy(), b_before)
    np.testing.assert_array_equal(new.get_layer("D").kernel.numpy(), d_before)


def test_report_prints_as_table(tmp_path):
    from rich.console import Console

    path = _save(source_model(), "weights.h5", tmp_path)
    report = warm_start(new_model(), path, freeze=["A"])
    console = Console(record=True, width=160)
    console.print(report)
    text = console.export_text()
    assert "shape mismatch" in text and "source (3, 5), (5,) vs model (3, 7), (7,)" in text
    assert "missing" in text and "unused" in text and "frozen" in text
    assert report.to_dict()["mismatched"][0]["model_shapes"] == [[3, 7], [7]]


def test_freeze_keeps_weights_fixed_after_a_step(tmp_path):
    path = _save(source_model(), "ckpt_prefix", tmp_path)
    new = new_model()
    report = warm_start(new, path, freeze=["A"])
    assert report.frozen == ["A"]
    a_before = new.get_layer("A").kernel.numpy().copy()
    d_before = new.get_layer("D").kernel.numpy().copy()
    opt = keras.optimizers.SGD(0.1)
    x = tf.random.normal((8, 4), seed=0)
    y = tf.ones((8, 1))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((new(x, training=True) - y) ** 2)
    names = {v.path for v in new.trainable_variables}
    assert "A/kernel" not in names and "D/kernel" in names
    grads = tape.gradient(loss, new.trainable_variables)
    opt.apply_gradients(zip(grads, new.trainable_variables, strict=True))
    np.testing.assert_array_equal(new.get_layer("A").kernel.numpy(), a_before)
    assert not np.allclose(new.get_layer("D").kernel.numpy(), d_before)


def test_freeze_unknown_layer_is_named(tmp_path):
    with pytest.raises(WarmStartError, match="no layer named 'Z'.*'A'"):
        freeze_layers(new_model(), ["Z"])


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(WarmStartError, match="init_from.*nothing to load"):
        warm_start(new_model(), tmp_path / "nowhere")
    with pytest.raises(WarmStartError, match="no such file"):
        warm_start(new_model(), tmp_path / "gone.keras")


# ---- with the real training loop -------------------------------------------------------------

TRAIN_MODELS = """
import keras

def source():
    inp = keras.Input((4,), name="x")
    h = keras.layers.Dense(3, name="A")(inp)
    h = keras.layers.Dense(5, name="B")(h)
    return keras.Model({"x": inp}, keras.layers.Dense(1, name="C")(h))

def target():
    inp = keras.Input((4,), name="x")
    h = keras.layers.Dense(3, name="A")(inp)
    h = keras.layers.Dense(7, name="B")(h)
    return keras.Model({"x": inp}, keras.layers.Dense(1, name="D")(h))
"""


def _write_tiny_data(root) -> None:
    import hashlib

    from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
    from tfperf.data.schema import Feature, Schema

    schema = Schema.of(
        Feature(name="x", dtype="float32", shape=(4,)),
        Feature(name="y", dtype="float32", shape=(1,)),
    )
    root.mkdir(parents=True)
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    shard = root / "all.tfrecord-00000-of-00001"
    with tf.io.TFRecordWriter(str(shard)) as w:
        for i, row in enumerate(x):
            w.write(schema.encode({"x": row, "y": row.sum(keepdims=True)}, i))
    data = shard.read_bytes()
    info = ShardInfo(
        file=shard.name, records=len(x), bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
    )
    split = SplitInfo(shards=[info], records=len(x))
    save_manifest(
        Manifest(name="tiny", schema=schema, splits={"train": split, "eval": split}), root
    )


def test_loop_warm_starts_and_freezes(tmp_path):
    """Run a trains A,B,C; run b (A, B', D) starts from a's run dir with A frozen: its
    checkpoint holds a's trained A unchanged after training."""
    import uuid

    from tfperf.config import load_config
    from tfperf.train.loop import train
    from tfperf.train.warm_start import read_checkpoint_variables

    _write_tiny_data(tmp_path / "data")
    module = f"ws_models_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(TRAIN_MODELS)
    common = (
        "data: {dir: data, label: y}\npipeline: {batch_size: 8, shuffle_buffer: 8}\n"
        "train: {monitor_system: false, log_every: 5, checkpoint: {every_steps: 10}, "
    )
    (tmp_path / "a.yaml").write_text(
        common + "out_dir: a}\n" + f"model: {{name: '{module}:source', loss: mse}}\n"
    )
    (tmp_path / "b.yaml").write_text(
        common + "out_dir: b, init_from: a, freeze: [A]}\n"
        f"model: {{name: '{module}:target', loss: mse, learning_rate: 0.1}}\n"
    )
    train(load_config(tmp_path / "a.yaml"), max_steps=10, progress=False)
    train(load_config(tmp_path / "b.yaml"), max_steps=10, progress=False)

    def values(prefix: str) -> dict[str, np.ndarray]:
        reader = tf.train.load_checkpoint(prefix)
        return {
            k: reader.get_tensor(key) for k, (key, _) in read_checkpoint_variables(prefix).items()
        }

    a = values(str(tmp_path / "a" / "checkpoints" / "ckpt-10"))
    b = values(str(tmp_path / "b" / "checkpoints" / "ckpt-10"))
    np.testing.assert_array_equal(b["A/kernel"], a["A/kernel"])  # loaded, then frozen
    np.testing.assert_array_equal(b["A/bias"], a["A/bias"])
    assert b["B/kernel"].shape == (3, 7) and "C/kernel" not in b and "D/kernel" in b
