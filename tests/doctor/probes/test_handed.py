"""Models handed to `tfperf.optimize` / `tfperf.diagnose` as Python objects
(doctor/probes/handed.py): registered under a 'module:function' name the run-file machinery
loads, each probe given a fresh clone so that the user's own model is never trained; the loss
it was compiled with, or one inferred from the labels; and the stand-in that costs nothing
per step when no model is given."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.probes import handed
from tfperf.errors import UserError
from tfperf.util.imports import load_object


def _model() -> keras.Model:
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(2), keras.layers.Dense(1)])


def test_a_registered_model_is_loaded_by_its_name_until_unregistered():
    make = handed.standin_factory()
    spec = handed.register(make)
    assert spec.startswith("tfperf.doctor.probes.handed:MODELS.")
    assert load_object(spec, field="model.name") is make
    assert handed.register(make) != spec  # each registration has a name of its own
    handed.unregister(spec)
    with pytest.raises(UserError, match="has no attribute"):
        load_object(spec, field="model.name")


def test_each_probe_trains_a_fresh_clone_compiled_with_the_loss():
    model = _model()
    make = handed.clone_factory(model, keras.losses.MeanAbsoluteError())
    a, b = make(), make()
    assert a is not model and b is not a
    assert [w.shape for w in a.get_weights()] == [w.shape for w in model.get_weights()]
    assert isinstance(handed.compiled_loss(a), keras.losses.MeanAbsoluteError)
    # A loss by name is the run file's to compile: the clone is left uncompiled.
    assert handed.compiled_loss(handed.clone_factory(model, "mse")()) is None


def test_a_model_keras_cannot_clone_is_handed_as_itself():
    class Custom(keras.Model):  # subclassed, without get_config
        def __init__(self, units: int) -> None:
            super().__init__()
            self.dense = keras.layers.Dense(units)

        def call(self, x):
            return self.dense(x)

    model = Custom(1)
    model(np.ones((1, 4), np.float32))
    assert handed.clone_factory(model)() is model


def test_the_compiled_loss_or_one_inferred_from_the_labels():
    model = _model()
    assert handed.compiled_loss(model) is None
    model.compile("sgd", "mse")
    assert handed.compiled_loss(model) == "mse"
    assert handed.infer_loss(tf.TensorSpec([None, 1], tf.float32)) == "mse"
    assert handed.infer_loss(tf.TensorSpec([None], tf.int64)) == "crossentropy"
    assert handed.infer_loss({"y": tf.TensorSpec([None], tf.bool)}) == "crossentropy"


def test_the_stand_in_reads_only_the_batch_size():
    model = handed.standin_factory()()
    assert model.name == "stand_in"
    features = {"text": tf.constant(["a", "b", "c"]), "n": tf.constant([[1], [2], [3]])}
    out = model(features)
    assert out.shape == (3, 1)
    loss = handed.standin_loss(tf.constant(["any", "label", "kind"]), out)
    assert loss.shape == (3,)
    history = model.fit(tf.data.Dataset.from_tensors((features, tf.zeros([3]))), verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_without_a_model_labels_of_any_structure_are_diagnosed():
    # Detection-style labels: one target per scale, of different shapes, and a dict beside
    # them. The stand-in reads none of them: no "outputs do not pair with the labels".
    import tfperf

    x = np.zeros((64, 4), np.float32)
    labels = (np.zeros((64, 2, 3), np.float32), np.zeros((64, 5), np.float32), np.zeros(64))
    ds = tf.data.Dataset.from_tensor_slices((x, (labels, {"k": np.arange(64)}))).batch(8)
    diag = tfperf.diagnose(ds, None, budget_s=10)
    assert diag.verdict, diag
