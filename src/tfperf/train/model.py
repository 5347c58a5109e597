"""The run file's model (or the workload's) with the loss, loss weights and metrics it
trains with (paired with its outputs in train/outputs.py, resolved by name in
train/objectives.py), its optimizer and learning-rate schedule (or
the compiled model's, or the workload's), and how a batch's features are fed to it: the
parts the train step (train/step.py) and the evaluator share.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.inputs.user_code import call_user
from tfperf.train.model_names import check_names
from tfperf.train.outputs import Wanted
from tfperf.util.imports import load_object

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from tfperf.workloads.base import Workload


class ModelError(UserError):
    """The run file's model, loss, optimizer or metrics cannot be used."""


# ---- the model, loss, metrics and optimizer -----------------------------------------------
def build_model_and_loss(cfg: RunConfig, metrics: bool = True) -> tuple[keras.Model, Wanted]:
    """(keras.Model, the loss, loss weights and metrics wanted), not yet paired with the
    model's outputs (train/outputs.py's `bind` pairs them, given one batch).

    The model comes from model.name ('module:function') or the workload. The loss is the
    run file's model.loss, else the compiled model's, else the workload's; its loss weights
    the run file's model.loss_weights, else the compiled model's; metrics the run file's,
    else the workload's, else the compiled model's. `metrics=False` reads none (the doctor
    times the bare step and never needs them).
    """
    import keras

    wl = None
    if cfg.workload:
        from tfperf.inputs.datasets import workload_of

        wl = workload_of(cfg)
    if cfg.model.name:
        here = str(Path(cfg.source).parent) if cfg.source else None
        fn = load_object(cfg.model.name, field="model.name", search_dir=here)
        doing = "building the model"
        model = (
            call_user(fn, "model.name", cfg.model.name, doing, cfg.source) if callable(fn) else fn
        )
    elif wl is not None:
        model = wl.build_model()
    else:
        raise ModelError(
            "model.name: expected 'module:function' returning a Keras model "
            "(or set workload), found nothing set"
        )
    if not isinstance(model, keras.Model):
        raise ModelError(
            f"model.name: {cfg.model.name} must return a keras.Model, found {type(model).__name__}"
        )
    check_names(model, f"model.name {cfg.model.name}" if cfg.model.name else "the workload's model")
    compiled = getattr(model, "_compile_config", None)
    compiled = compiled.config if compiled is not None else {}
    if cfg.model.loss:
        loss_spec, where = cfg.model.loss, "model.loss"
    elif compiled.get("loss") is not None:
        loss_spec, where = compiled["loss"], "the compiled model's loss"
    elif wl is not None:
        loss_spec, where = wl.loss, f"workload {wl.name}'s loss"
    else:
        raise ModelError(
            "model.loss: expected a Keras loss name (e.g. mse, binary_crossentropy), "
            "found nothing set and the model is not compiled"
        )
    weights: Any
    if cfg.model.loss_weights is not None:
        weights, weights_where = cfg.model.loss_weights, "model.loss_weights"
    else:
        # The compiled model's weights go with its own loss only.
        own = where == "the compiled model's loss"
        weights = compiled.get("loss_weights") if own else None
        weights_where = "the compiled model's loss_weights"
    names: Any = None
    metrics_where = "model.metrics"
    if not metrics:
        pass
    elif cfg.model.metrics is not None:
        names = cfg.model.metrics
    elif wl is not None and wl.metrics:
        names, metrics_where = list(wl.metrics), f"workload {wl.name}'s metrics"
    else:
        names, metrics_where = compiled.get("metrics") or [], "the compiled model's metrics"
    wanted = Wanted(loss_spec, where, weights, weights_where, names, metrics_where)
    return model, wanted


def make_optimizer(
    cfg: RunConfig, model: keras.Model, total_steps: int | None, workload: Workload | None = None
) -> keras.Optimizer:
    """The run file's optimizer and learning-rate schedule, else the compiled model's."""
    import keras

    fields = cfg.model.model_fields_set
    compiled_opt = getattr(model, "optimizer", None) if getattr(model, "compiled", False) else None
    if compiled_opt is not None and not ({"optimizer", "learning_rate", "lr_schedule"} & fields):
        return compiled_opt
    name = cfg.model.optimizer
    lr = cfg.model.learning_rate
    if workload is not None and "optimizer" not in fields:
        name = getattr(workload, "optimizer", name)
    if workload is not None and "learning_rate" not in fields:
        lr = getattr(workload, "learning_rate", lr)
    try:
        base = keras.optimizers.get(name)
    except ValueError:
        raise ModelError(
            f"model.optimizer: expected a Keras optimizer name (adam, sgd, "
            f"rmsprop, ...), found '{name}'"
        ) from None
    schedule = learning_rate_schedule(cfg, lr, total_steps)
    return type(base)(learning_rate=schedule)


def learning_rate_schedule(cfg: RunConfig, lr: float, total_steps: int | None) -> Any:
    """constant | cosine | exponential, with an optional linear warm-up."""
    import keras

    kind, warmup = cfg.model.lr_schedule, cfg.model.warmup_steps
    decay_steps = max(1, (total_steps or 10_000) - warmup)  # 10k: when the length is unknown
    if kind == "constant" and not warmup:
        return lr
    if kind == "cosine":
        inner = keras.optimizers.schedules.CosineDecay(lr, decay_steps)
    elif kind == "exponential":
        inner = keras.optimizers.schedules.ExponentialDecay(lr, decay_steps, 0.1)
    else:
        inner = None
    return WarmupSchedule(lr, warmup, inner)


def _warmup_base() -> type:
    import keras

    return keras.optimizers.schedules.LearningRateSchedule


class WarmupSchedule(_warmup_base()):  # type: ignore[misc]
    """Linear warm-up to `lr` over `warmup` steps, then `inner` (or constant)."""

    def __init__(self, lr: float, warmup: int, inner: Any = None):
        self.lr, self.warmup, self.inner = lr, warmup, inner

    def __call__(self, step: Any) -> Any:
        from keras import ops

        step = ops.cast(step, "float32")
        after = self.inner(ops.maximum(step - self.warmup, 0.0)) if self.inner else self.lr
        if not self.warmup:
            return after
        ramp = self.lr * ops.minimum(1.0, (step + 1.0) / float(self.warmup))
        return ops.where(step < self.warmup, ramp, after)

    def get_config(self) -> dict[str, Any]:
        return {"lr": self.lr, "warmup": self.warmup}


def build_model_variables(
    strategy: tf.distribute.Strategy,
    model: keras.Model,
    optimizer: keras.Optimizer,
    element_spec: Any,
    before_optimizer: Callable[[keras.Model], None] | None = None,
) -> None:
    """Creates every model and optimizer variable before the first trace (inside the
    strategy's scope), by calling the model once on zeros shaped like one batch.

    `before_optimizer(model)` runs in between (warm start and freezing change which
    variables are trainable, hence which slots the optimizer creates).
    """
    with strategy.scope():
        if not model.built or not model.weights:
            model(adapt_features(model, zeros_batch(element_spec[0])))
        if before_optimizer is not None:
            before_optimizer(model)
        optimizer.build(model.trainable_variables)


def adapt_features(model: keras.Model, features: Any) -> Any:
    """Feature dicts shaped for the model: only the keys its inputs name (extra features,
    such as an id, are left out), a plain tensor for an unnamed single input."""
    if not isinstance(features, dict):
        return features
    struct = getattr(model, "_inputs_struct", None)  # a functional model's input structure
    if isinstance(struct, dict) and all(k in features for k in struct):
        return {k: features[k] for k in struct}
    inputs = getattr(model, "inputs", None) or []
    names = [getattr(t, "name", "").split(":")[0] for t in inputs]
    if len(names) == 1 and names[0] in features:
        return features[names[0]]
    if len(features) == 1 and len(names) <= 1:
        return next(iter(features.values()))
    if len(names) > 1 and all(n in features for n in names):
        return [features[n] for n in names]
    return features


def zeros_batch(spec: Any) -> Any:
    """Zeros shaped like a batch of `spec` (unknown axes, the batch among them, as 1)."""
    import tensorflow as tf

    def zeros(s: Any) -> Any:
        return tf.zeros([1 if d is None else d for d in s.shape.as_list()], s.dtype)

    return tf.nest.map_structure(zeros, spec)
