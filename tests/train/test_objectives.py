"""model.metrics: [accuracy] and model.loss: crossentropy resolved from the output and
label shapes as Keras's compile does (binary, sparse, one-hot), in the training loop and in
the evaluator: the evaluator's numbers equal Keras's own compile + evaluate; the one value
per example that both reduce a loss or metric to."""

from __future__ import annotations

import uuid

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.evaluator import Evaluator
from tfperf.train.loop import train

USER_CODE = """
import keras
import numpy as np
import tensorflow as tf

N = 256
RNG = np.random.default_rng(0)
X = RNG.standard_normal((N, 4)).astype("float32")
CLASSES = np.argmax(X[:, :3], axis=1)
LABELS = {
    "binary": (X[:, 0] > 0).astype("float32"),  # 0/1
    "sparse": CLASSES.astype("int64"),  # class indices
    "onehot": np.eye(3, dtype="float32")[CLASSES],
}


def _pipeline(kind):
    def pipeline(training, batch_size):
        ds = tf.data.Dataset.from_tensor_slices(({"x": X}, LABELS[kind]))
        if training:
            return ds.shuffle(N, seed=0).repeat().batch(batch_size)
        return ds.batch(batch_size)

    return pipeline


binary, sparse, onehot = _pipeline("binary"), _pipeline("sparse"), _pipeline("onehot")


def sigmoid_model():
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(1, activation="sigmoid")(x))


def softmax_model():
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(3, activation="softmax")(x))
"""

CASES = [("binary", "sigmoid_model"), ("sparse", "softmax_model"), ("onehot", "softmax_model")]


def _runfile(tmp_path, kind: str, model: str) -> tuple[str, str]:
    module = f"user_code_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(USER_CODE)
    doc = {
        "data": {"pipeline": f"{module}:{kind}"},
        "pipeline": {"batch_size": 16},
        "model": {
            "name": f"{module}:{model}",
            "loss": "crossentropy",
            "metrics": ["accuracy"],
            "learning_rate": 0.05,
        },
        "train": {"out_dir": str(tmp_path / "run"), "monitor_system": False, "max_steps": 80},
        "eval": {"metric": "accuracy", "mode": "max"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path), module


@pytest.mark.parametrize(("kind", "model"), CASES, ids=[c[0] for c in CASES])
def test_accuracy_and_crossentropy_follow_the_shapes(tmp_path, kind, model):
    import tensorflow as tf

    rf, module = _runfile(tmp_path, kind, model)
    cfg = load_config(rf)
    result = train(cfg, progress=False)
    assert result.metrics["metrics/accuracy"] > 0.6  # not Keras's exact match (always 0)

    # The evaluator's loss and accuracy are Keras's own after compile(crossentropy, accuracy).
    step, got, examples = Evaluator(cfg).evaluate(result.checkpoint)
    assert step == 80 and examples == 256 and got["accuracy"] > 0.6
    user = __import__(module)
    reference = getattr(user, model)()
    tf.train.Checkpoint(model=reference).read(result.checkpoint).expect_partial()
    reference.compile(loss="crossentropy", metrics=["accuracy"])
    want = reference.evaluate(getattr(user, kind)(False, 16), verbose=0, return_dict=True)
    assert got["accuracy"] == pytest.approx(want["accuracy"], abs=1e-6)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)


OWN_BATCH_CODE = """
import keras
import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(1)
X = RNG.standard_normal((512, 4)).astype("float32")
Y = np.argmax(X[:, :3], axis=1).astype("int64")


def pipeline(training=True):
    # batches 32 whatever pipeline.batch_size says (512 by default), as users' functions do
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(32, drop_remainder=True)


def softmax_model():
    keras.utils.set_random_seed(3)
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(3, activation="softmax")(x))
"""


@pytest.mark.parametrize("steps_per_loop", [1, 4])
def test_metrics_of_a_pipeline_with_its_own_batch_agree_with_keras(tmp_path, steps_per_loop):
    """The loss and accuracy of the last call are Keras' own on the same batches (a learning
    rate too small to move the weights): they were divided by pipeline.batch_size (512) while
    the pipeline batched 32, reading accuracy 0.06 for a model Keras put at 0.8."""
    module = f"own_batch_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(OWN_BATCH_CODE)
    steps = 8
    doc = {
        "data": {"pipeline": f"{module}:pipeline"},
        "model": {
            "name": f"{module}:softmax_model",
            "loss": "sparse_categorical_crossentropy",
            "metrics": ["accuracy"],
            "learning_rate": 1e-12,
        },
        "train": {
            "out_dir": str(tmp_path / "run"),
            "monitor_system": False,
            "max_steps": steps,
            "steps_per_loop": steps_per_loop,
        },
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    result = train(load_config(tmp_path / "run.yaml"), progress=False)
    assert result.global_batch == 32
    user = __import__(module)
    reference = user.softmax_model()
    reference.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    last_call = user.pipeline().skip(steps - steps_per_loop).take(steps_per_loop)
    want = reference.evaluate(last_call, verbose=0, return_dict=True)
    assert result.metrics["metrics/accuracy"] == pytest.approx(want["accuracy"], abs=1e-5)
    assert result.final_loss == pytest.approx(want["loss"], rel=1e-4)


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


STATEFUL_CODE = """
import keras
import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(2)
X = RNG.standard_normal((256, 4)).astype("float32")
Y = (X[:, 0] + 0.5 * RNG.standard_normal(256) > 0).astype("float32")


def pipeline(training=True, batch_size=32):
    return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(32, drop_remainder=True)


def sigmoid_model():
    keras.utils.set_random_seed(4)
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(1, activation="sigmoid")(x))


def compiled_iou():
    model = sigmoid_model()
    model.compile(
        loss="binary_crossentropy",
        metrics=[keras.metrics.AUC(name="auc"), keras.metrics.BinaryIoU(name="iou")],
    )
    return model
"""

STATEFUL = ["auc", "precision", "recall"]


def test_stateful_metrics_are_fits_and_evaluates(tmp_path):
    """AUC, Precision and Recall as fit reports them over its batches (a call of all the
    steps: the epoch) and, in the evaluator, as evaluate reports them over the split; a
    compiled model's own stateful metrics (BinaryIoU) likewise. A learning rate too small
    to move the weights: fit's epoch and evaluate see the same predictions."""
    import keras
    import tensorflow as tf

    module = f"stateful_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(STATEFUL_CODE)
    steps = 8
    doc = {
        "data": {"pipeline": f"{module}:pipeline"},
        "model": {
            "name": f"{module}:sigmoid_model",
            "loss": "binary_crossentropy",
            "metrics": [*STATEFUL, "accuracy"],
            "optimizer": "sgd",
            "learning_rate": 1e-12,
        },
        "train": {
            "out_dir": str(tmp_path / "run"),
            "monitor_system": False,
            "max_steps": steps,
            "steps_per_loop": steps,
        },
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(tmp_path / "run.yaml")
    result = train(cfg, progress=False)
    user = __import__(module)
    reference = user.sigmoid_model()
    reference.compile(
        optimizer=keras.optimizers.SGD(1e-12),
        loss="binary_crossentropy",
        metrics=[*STATEFUL, "accuracy"],
    )
    fitted = reference.fit(user.pipeline(), epochs=1, verbose=0).history
    evaluated = reference.evaluate(user.pipeline(), verbose=0, return_dict=True)
    for name in [*STATEFUL, "accuracy"]:
        got = result.metrics[f"metrics/{name}"]
        assert got == pytest.approx(fitted[name][-1], abs=1e-5), name
        assert 0.0 < got < 1.0  # a real value, not a fresh metric's 0
    _, measured, _ = Evaluator(cfg).evaluate(result.checkpoint)
    for name in [*STATEFUL, "accuracy", "loss"]:
        assert measured[name] == pytest.approx(evaluated[name], abs=1e-5), name

    # The compiled model's own metric objects (no model.metrics in the run file).
    doc["model"] = {"name": f"{module}:compiled_iou", "learning_rate": 1e-12, "optimizer": "sgd"}
    doc["train"]["out_dir"] = str(tmp_path / "run2")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    cfg = load_config(tmp_path / "run.yaml")
    result = train(cfg, progress=False)
    compiled = user.compiled_iou()
    tf.train.Checkpoint(model=compiled).read(result.checkpoint).expect_partial()
    want = compiled.evaluate(user.pipeline(), verbose=0, return_dict=True)
    _, measured, _ = Evaluator(cfg).evaluate(result.checkpoint)
    assert measured["iou"] == pytest.approx(want["iou"], abs=1e-5)
    assert measured["auc"] == pytest.approx(want["auc"], abs=1e-5)


def test_a_huge_loss_or_metric_name_is_quoted_cut():
    from tfperf.errors import UserError
    from tfperf.train.objectives import resolve_loss, resolve_metric

    for resolve in (resolve_loss, resolve_metric):
        with pytest.raises(UserError) as info:
            resolve("x" * 50_000, "model.loss")
        message = str(info.value)
        assert len(message) < 600 and "49,800 characters cut" in message, message[:700]
