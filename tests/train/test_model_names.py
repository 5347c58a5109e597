"""train/model_names: a model or layer named with characters TensorFlow refuses in scope
names (`model<x>`, `dense<x>`, a space) is a ModelNameError naming it, the characters TF
allows and how to rename it, from `tfperf train` and `tfperf doctor` alike, instead of a
27-frame traceback from the first compiled step."""

from __future__ import annotations

import keras
import pytest

from tfperf.train.model_names import ModelNameError, check_names

from helpers import trainkit

BAD_MODELS = """
import keras


def bad_model():
    x = keras.Input(shape=(4,), name="x")
    return keras.Model({"x": x}, keras.layers.Dense(1, name="logit")(x), name="model<x>")


def bad_layer():
    x = keras.Input(shape=(4,), name="x")
    h = keras.layers.Dense(8, name="hidden layer")(x)
    return keras.Model({"x": x}, keras.layers.Dense(1, name="logit")(h))
"""


def _model(name="m", layer="dense"):
    x = keras.Input(shape=(4,))
    return keras.Model(x, keras.layers.Dense(1, name=layer)(x), name=name)


def test_names_tensorflow_takes_pass():
    check_names(_model("my.model-2>a", "dense_1.x-y>z"), "model.name m:f")


def test_a_model_name_tensorflow_refuses_is_named():
    with pytest.raises(ModelNameError) as err:
        check_names(_model("model<x>"), "model.name m:f")
    msg = str(err.value)
    assert msg.startswith("model.name m:f: the model is named 'model<x>', which TensorFlow")
    assert "letters, digits and the characters _ . - > / \\" in msg and "found '<'" in msg
    with pytest.raises(ModelNameError, match=r"named '_m'.*starting with a letter.*found '_'"):
        check_names(_model("_m"), "model.name m:f")


def test_a_layer_name_is_named_with_its_model_even_when_nested():
    inner = _model("inner", "dense<x>")
    x = keras.Input(shape=(4,))
    outer = keras.Model(x, inner(x), name="outer")
    with pytest.raises(ModelNameError) as err:
        check_names(outer, "the workload's model")
    msg = str(err.value)
    assert "layer 'dense<x>' (Dense) of model 'outer'" in msg and "found '<'" in msg


@pytest.fixture(scope="module")
def bad_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("names")
    data = trainkit.write_data(folder / "data", n=32)
    runfile = trainkit.write_runfile(folder, data, max_steps=2)
    (folder / "badnames.py").write_text(BAD_MODELS)
    return runfile


@pytest.mark.parametrize(
    ("command", "model", "expected"),
    [
        ("train", "bad_model", "the model is named 'model<x>', which TensorFlow refuses"),
        ("train", "bad_layer", "layer 'hidden layer' (Dense) of model 'functional"),
        ("doctor", "bad_model", "the model is named 'model<x>', which TensorFlow refuses"),
    ],
)
def test_train_and_doctor_stop_with_one_paragraph(bad_run, command, model, expected):
    res = trainkit.tfperf_here(
        command, bad_run, "--set", f"model.name=badnames:{model}", check=False
    )
    assert res.returncode == 2, res.stderr[-3000:]
    msg = " ".join(res.stderr.split())
    assert f"model.name badnames:{model}: {expected}" in msg, msg
    assert "Traceback" not in res.stderr and "root scope" not in res.stderr
