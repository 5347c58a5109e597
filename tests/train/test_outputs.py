"""Models as Keras' compile takes them (train/outputs.py): several outputs (a dict or a
list) with a loss, loss weight and metrics per output (a dict keyed by output name or a
list), one loss for every output, dict labels and per-example sample weights ((x, y, sw)
batches). A run of `tfperf train` on such a model, its evaluator's loss and metrics equal to
Keras' own compile + evaluate on the same checkpoint and batches; and each mismatch between
the outputs and the labels (or the keys given per output) as one paragraph naming both."""

from __future__ import annotations

import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf
import yaml

from tfperf.config import load_config
from tfperf.train.evaluator import Evaluator
from tfperf.train.loop import train
from tfperf.train.outputs import Objectives, OutputsError, Wanted, bind

from helpers import trainkit

USER_CODE = """
import keras
import numpy as np
import tensorflow as tf

N = 96
RNG = np.random.default_rng(0)
X = RNG.standard_normal((N, 4)).astype("float32")
COUNT = X.sum(axis=1, keepdims=True).astype("float32")
MANY = (X[:, :3] > 0).astype("float32")
SW = RNG.uniform(0.2, 2.0, N).astype("float32")


def weighted(training=True, batch_size=16):
    ds = tf.data.Dataset.from_tensor_slices(({"x": X}, {"count": COUNT, "many": MANY}, SW))
    ds = ds.batch(16, drop_remainder=True)
    return ds.repeat() if training else ds


def one_label(training=True, batch_size=16):
    ds = tf.data.Dataset.from_tensor_slices(({"x": X}, COUNT)).batch(16, drop_remainder=True)
    return ds.repeat() if training else ds


def two_outputs():
    keras.utils.set_random_seed(5)
    x = keras.Input((4,), name="x")
    h = keras.layers.Dense(8, activation="relu")(x)
    count = keras.layers.Dense(1, name="count")(h)
    many = keras.layers.Dense(3, activation="sigmoid", name="many")(h)
    return keras.Model({"x": x}, {"count": count, "many": many})
"""

LOSS = {"count": "mse", "many": "binary_crossentropy"}
WEIGHTS = {"count": 0.5, "many": 2.0}


def _runfile(tmp_path, pipeline: str = "weighted", **model) -> tuple[str, str]:
    module = f"outputs_code_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(USER_CODE)
    doc = {
        "data": {"pipeline": f"{module}:{pipeline}"},
        "pipeline": {"batch_size": 16},
        "model": {"name": f"{module}:two_outputs", "learning_rate": 0.01, **model},
        "train": {"out_dir": str(tmp_path / "run"), "monitor_system": False, "max_steps": 12},
        "eval": {"metric": "loss"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path), module


def test_several_outputs_train_and_evaluate_as_keras_does(tmp_path):
    rf, module = _runfile(tmp_path, loss=LOSS, loss_weights=WEIGHTS, metrics={"many": ["accuracy"]})
    cfg = load_config(rf)
    result = train(cfg, progress=False)
    # Each output's own loss is logged as fit logs it; the key of metrics names an output.
    assert {"metrics/count_loss", "metrics/many_loss", "metrics/many_accuracy"} <= set(
        result.metrics
    )
    step, got, examples = Evaluator(cfg).evaluate(result.checkpoint)
    assert step == 12 and examples == 96
    user = __import__(module)
    reference = user.two_outputs()
    tf.train.Checkpoint(model=reference).read(result.checkpoint).expect_partial()
    reference.compile(loss=LOSS, loss_weights=WEIGHTS, metrics={"many": ["accuracy"]})
    want = reference.evaluate(user.weighted(False), verbose=0, return_dict=True)
    assert got["loss"] == pytest.approx(want["loss"], rel=1e-5)  # weighted, sample-weighted
    assert got["many_accuracy"] == pytest.approx(want["many_accuracy"], abs=1e-6)
    for name in ("count_loss", "many_loss"):
        assert got[name] == pytest.approx(want[name], rel=1e-5), name


@pytest.mark.parametrize(
    ("pipeline", "sets", "expected"),
    [
        # --set model.loss=mse on a dict-output model whose batches hold one label
        ("one_label", ["model.loss=mse"], "2 outputs ['count', 'many'] and one label tensor"),
        ("weighted", ["model.loss={count: mse, other: mse}"], "found the key(s) ['other']"),
        ("weighted", ["model.loss=[mse]"], "expected one loss per output (2: ['count', 'many'])"),
        # each output's labels checked against its own loss, named by its key
        (
            "weighted",
            ["model.loss={count: mse, many: sparse_categorical_crossentropy}"],
            "model.loss['many']: checking the model against the data",
        ),
    ],
)
def test_a_mismatch_is_one_paragraph_naming_both(tmp_path, pipeline, sets, expected):
    rf, _ = _runfile(tmp_path, pipeline, loss=LOSS)
    res = trainkit.tfperf_here(
        "train", rf, "--no-progress", *[f"--set={s}" for s in sets], check=False
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and expected in res.stderr, res.stderr
    error = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(error) <= 3, res.stderr  # one paragraph (wrapped at most by the console)


def _model(outputs: str) -> keras.Model:
    x = keras.Input((4,), name="x")
    a = keras.layers.Dense(1, name="count")(x)
    if outputs == "one":
        return keras.Model(x, a)
    b = keras.layers.Dense(3, activation="sigmoid", name="many")(x)
    return keras.Model(x, {"count": a, "many": b} if outputs == "dict" else [a, b])


def _bind(model: keras.Model, labels, **wanted) -> Objectives:
    out = model(tf.zeros([2, 4]))
    return bind(Wanted(**wanted), model, out, labels, batch=2, fix="FIX")


L1, L3 = tf.TensorSpec([None, 1]), tf.TensorSpec([None, 3])


def test_list_outputs_pair_by_position_and_names_by_layer():
    model = _model("list")
    obj = _bind(model, (L1, L3), loss=["mse", "binary_crossentropy"], metrics=[None, ["auc"]])
    assert [(h.name, h.pred_key, h.label_key) for h in obj.heads] == [
        ("count", 0, 0),
        ("many", 1, 1),
    ]
    assert obj.names == ["count_loss", "many_loss", "many_auc"]  # auc: stateful
    # One loss for every output, labels keyed by output name.
    obj = _bind(model, {"many": L3, "count": L1}, loss="mse", weights={"many": 3.0})
    assert [(h.label_key, h.weight) for h in obj.heads] == [("count", 1.0), ("many", 3.0)]


def test_the_loss_weights_and_sample_weights_make_the_total():
    model = _model("dict")
    obj = _bind(model, {"count": L1, "many": L3}, loss="mae", weights=[2.0, 0.0])
    labels = {"count": tf.ones([2, 1]), "many": tf.ones([2, 3])}
    preds = {"count": tf.zeros([2, 1]), "many": tf.zeros([2, 3])}
    total, each = obj.losses(labels, preds, tf.constant([1.0, 3.0]))
    np.testing.assert_allclose(total.numpy(), [2.0, 6.0])  # 2 x |1 - 0| x sw; many weighs 0
    np.testing.assert_allclose(each["many_loss"].numpy(), [1.0, 3.0])


@pytest.mark.parametrize(
    ("outputs", "labels", "expected"),
    [
        ("dict", L1, "2 outputs ['count', 'many'] and one label tensor"),
        ("dict", {"count": L1}, "no label for the output(s) ['many']"),
        ("list", (L1,), "2 outputs and 1 labels"),
        ("one", {"a": L1, "b": L3}, "one output ('count') and 2 labels ['a', 'b']"),
    ],
)
def test_outputs_and_labels_that_do_not_pair(outputs, labels, expected):
    with pytest.raises(OutputsError) as err:
        _bind(_model(outputs), labels, loss="mse")
    text = str(err.value)
    assert expected in text and "\n" not in text
    assert text.startswith("model.name: the model's outputs ") and "the labels " in text
    assert text.endswith("FIX")


def test_print_tensors_keeps_a_dict_of_outputs(tmp_path, capfd):
    """--print-tensors taps a layer through a second model whose outputs come as a list: the
    dict of outputs is rebuilt by name for the losses."""
    rf, _ = _runfile(tmp_path, loss=LOSS)
    cfg = load_config(rf, ["train.max_steps=2", "train.print_tensors=[many]"])
    result = train(cfg, progress=False)
    assert result.final_loss > 0 and "many" in capfd.readouterr().err
