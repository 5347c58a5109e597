"""The run file's model, its per-example loss and metrics, its optimizer and learning-rate
schedule (or the compiled model's, or the workload's), and the shapes they are fed: the
parts the train step (train/step.py) and the evaluator share.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfperf.errors import UserError
from tfperf.util.imports import load_object


class ModelError(UserError):
    """The run file's model, loss, optimizer or metrics cannot be used."""


# ---- the model, loss, metrics and optimizer -----------------------------------------------
def build_model_and_loss(cfg: Any) -> tuple[Any, Callable, dict[str, Callable]]:
    """(keras.Model, per-example loss fn(y_true, y_pred), {name: per-example metric fn}).

    The model comes from model.name ('module:function') or the workload. The loss is the
    run file's model.loss, else the compiled model's, else the workload's; metrics likewise
    (run file, workload, compiled model).
    """
    import keras

    wl = None
    if cfg.workload:
        from tfperf.inputs.datasets import workload_of

        wl = workload_of(cfg)
    if cfg.model.name:
        here = str(Path(cfg.source).parent) if cfg.source else None
        fn = load_object(cfg.model.name, field="model.name", search_dir=here)
        model = fn() if callable(fn) else fn
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
    loss = _rank_safe(resolve_loss(loss_spec, where))
    if cfg.model.metrics is not None:
        names, where = list(cfg.model.metrics), "model.metrics"
    elif wl is not None and wl.metrics:
        names, where = list(wl.metrics), f"workload {wl.name}'s metrics"
    else:
        names, where = list(compiled.get("metrics") or []), "the compiled model's metrics"
    metrics = {metric_name(m): _rank_safe(resolve_metric(m, where)) for m in names}
    return model, loss, metrics


LOGITS_SUFFIX = "_from_logits"


def _get_or_none(getter: Callable, name: str) -> Any:
    try:
        return getter(name)
    except (ValueError, TypeError):
        return None


def resolve_loss(spec: Any, where: str) -> Callable:
    """A per-example loss function from a name, a Loss object or a function."""
    import keras

    obj = None
    if isinstance(spec, str) and spec.endswith(LOGITS_SUFFIX):
        # 'binary_crossentropy_from_logits': a run file's way to say from_logits=True.
        fn = _get_or_none(keras.losses.get, spec.removesuffix(LOGITS_SUFFIX))
        if fn is not None:
            return lambda y, p: fn(y, p, from_logits=True)
    elif isinstance(spec, str):
        obj = _get_or_none(keras.losses.get, spec)
    else:
        obj = spec
    if obj is None:
        raise ModelError(
            f"{where}: expected a Keras loss name (mse, binary_crossentropy, "
            f"binary_crossentropy{LOGITS_SUFFIX}, ...), found {spec!r}"
        )
    if isinstance(obj, keras.losses.Loss):
        return obj.call  # the unreduced per-example values (no reduction, no mask)
    if callable(obj):
        return obj
    raise ModelError(f"{where}: expected a loss function or keras.losses.Loss, found {spec!r}")


def metric_name(spec: Any) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "name", getattr(spec, "__name__", "m"))


def resolve_metric(spec: Any, where: str) -> Callable:
    """Per-example metric functions only: they reduce correctly across replicas and steps."""
    import keras

    try:
        obj = keras.metrics.get(spec) if isinstance(spec, str) else spec
    except ValueError:
        obj = None
    fn = getattr(obj, "_fn", None)  # MeanMetricWrapper (accuracy, mae, ...)
    if fn is not None:
        kwargs = dict(getattr(obj, "_fn_kwargs", {}) or {})
        return lambda y, p: fn(y, p, **kwargs)
    if callable(obj) and not isinstance(obj, keras.metrics.Metric):
        return obj
    raise ModelError(
        f"{where}: metric {spec!r} is not a per-example function (e.g. mae, accuracy, "
        "binary_accuracy); stateful metrics such as AUC belong to the evaluator"
    )


def make_optimizer(cfg: Any, model: Any, total_steps: int | None, workload: Any = None) -> Any:
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


def learning_rate_schedule(cfg: Any, lr: float, total_steps: int | None) -> Any:
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
    strategy: Any, model: Any, optimizer: Any, element_spec: Any, before_optimizer: Any = None
) -> None:
    """Creates every model and optimizer variable before the first trace (inside the
    strategy's scope), by calling the model once on zeros shaped like one batch.

    `before_optimizer(model)` runs in between (warm start and freezing change which
    variables are trainable, hence which slots the optimizer creates).
    """
    import tensorflow as tf

    features_spec = element_spec[0]

    def zeros(spec: Any) -> Any:
        shape = [1 if d is None else d for d in spec.shape.as_list()]
        return tf.zeros(shape, spec.dtype)

    with strategy.scope():
        if not model.built or not model.weights:
            model(adapt_features(model, tf.nest.map_structure(zeros, features_spec)))
        if before_optimizer is not None:
            before_optimizer(model)
        optimizer.build(model.trainable_variables)


def adapt_features(model: Any, features: Any) -> Any:
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


def to_float32(t: Any) -> Any:
    import tensorflow as tf

    return tf.cast(t, tf.float32) if t.dtype.is_floating else t


def _rank_safe(fn: Callable) -> Callable:
    """fn(y_true, y_pred) that accepts [B] labels for [B, 1] predictions (as compile does)."""

    def call(y_true: Any, y_pred: Any) -> Any:
        return fn(match_rank(y_true, y_pred), y_pred)

    return call


def match_rank(labels: Any, preds: Any) -> Any:
    """[B] labels for [B, 1] predictions get the trailing axis, as Keras' compile does."""
    import tensorflow as tf

    if not (tf.is_tensor(labels) and tf.is_tensor(preds)):
        return labels
    if labels.shape.rank is not None and labels.shape.rank == preds.shape.rank - 1:
        return tf.expand_dims(labels, -1)
    return labels


def per_example(values: Any) -> Any:
    """Loss or metric values as float32, one per example: a scalar becomes [1], [B] stays,
    [B, ...] is averaged over its non-batch axes (the train step and the evaluator share
    this reduction)."""
    import tensorflow as tf

    values = tf.cast(values, tf.float32)
    if values.shape.rank == 0:
        return tf.reshape(values, [1])
    if values.shape.rank == 1:
        return values
    return tf.reduce_mean(tf.reshape(values, [tf.shape(values)[0], -1]), axis=1)
