"""Models handed to `tfperf.optimize` / `tfperf.diagnose` as Python objects rather than named
in a run file: each is registered here under a 'module:function' name that the run-file
machinery (model.name) loads, returning a fresh clone per probe so that the user's own
model is never trained; and the stand-in model used when no model is given."""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras

# name -> factory; model.name = "tfperf.doctor.probes.handed:MODELS.<name>" loads the factory.
MODELS = types.SimpleNamespace()
_ids = itertools.count()


def register(make: Callable[[], keras.Model]) -> str:
    """A model.name under which `make()` is found; `unregister` it when done."""
    name = f"m{next(_ids)}"
    setattr(MODELS, name, make)
    return f"{__name__}:MODELS.{name}"


def register_step(step: Any) -> str:
    """A model.name under which a user's training step (a `step_fn.StepFn`) is found."""
    name = f"s{next(_ids)}"
    setattr(MODELS, name, step)
    return f"{__name__}:MODELS.{name}"


def unregister(spec: str) -> None:
    delattr(MODELS, spec.rsplit(".", 1)[-1])


def step_of(spec: str | None) -> Any:
    """The training step registered under model.name `spec` (a `step_fn.StepFn`), or None
    when `spec` names a model."""
    prefix = f"{__name__}:MODELS."
    if not spec or not spec.startswith(prefix):
        return None
    found = getattr(MODELS, spec.removeprefix(prefix), None)
    return None if callable(found) and not hasattr(found, "run_fed") else found


def compiled_loss(model: keras.Model) -> Any:
    """The loss `model` was compiled with, or None."""
    config = getattr(model, "_compile_config", None)
    return (config.config if config is not None else {}).get("loss")


def clone_factory(model: keras.Model, loss: Any = None) -> Callable[[], keras.Model]:
    """Fresh copies of `model` (same layers, new weights), compiled with `loss` when it is a
    loss object or function; a model Keras cannot clone (subclassed without get_config) is
    handed as itself (the caller restores its weights)."""
    import keras

    def make() -> keras.Model:
        try:
            clone = keras.models.clone_model(model)
        except Exception:  # noqa: BLE001 - not clonable: the model itself
            return model
        if loss is not None and not isinstance(loss, str):
            clone.compile(optimizer="adam", loss=loss)
        return clone

    return make


def standin_factory() -> Callable[[], keras.Model]:
    """A model that costs next to nothing per step whatever the features (any structure,
    any dtype): training then runs at the pipeline's pace, which is what the doctor times
    when the user gives no model."""
    import keras
    import tensorflow as tf

    class StandIn(keras.Model):
        def __init__(self) -> None:
            super().__init__(name="stand_in")
            self.out = keras.layers.Dense(1)

        def call(self, features: Any, training: bool = False) -> Any:
            first = tf.nest.flatten(features)[0]
            # One row of ones per example: the batch size is all it reads.
            return self.out(tf.ones(tf.stack([tf.shape(first)[0], 1])))

    def make() -> keras.Model:
        model = StandIn()
        model.compile(optimizer="adam", loss=standin_loss)
        return model

    return make


def standin_loss(y_true: Any, y_pred: Any) -> Any:
    """The stand-in's loss: its output squared (labels of any kind are not read)."""
    import tensorflow as tf

    return tf.reduce_mean(tf.square(y_pred), axis=-1)


standin_loss.reads_labels = False  # type: ignore[attr-defined]  # labels of any structure


def infer_loss(labels_spec: Any) -> str:
    """The loss for a model compiled without one, from the labels: float labels
    regress (mse), integer or boolean labels classify ('crossentropy': binary, sparse or
    categorical from the shapes, as Keras's compile chooses)."""
    import tensorflow as tf

    spec = tf.nest.flatten(labels_spec)[0]
    return "mse" if spec.dtype.is_floating else "crossentropy"
