"""The per-example loss and metrics a run file names (or the compiled model holds), resolved
as Keras's `model.compile` resolves them: 'accuracy' and 'crossentropy' become the binary,
sparse or categorical kind from the model output's and the labels' shapes; the train step
and the evaluator reduce them the same way (`per_example`). A Keras metric with state (AUC,
Precision, Recall, MeanIoU) is a `Stateful`: updated batch by batch, read at the end. Which
output each one applies to is train/outputs.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tfperf.errors import UserError
from tfperf.util.format import quoted

LOGITS_SUFFIX = "_from_logits"
# Names compile resolves from the shapes (keras/src/trainers/compile_utils.py: get_metric
# for accuracy, get_loss for crossentropy); a run file may use either kind in either list.
ACCURACY_NAMES = ("accuracy", "acc")
CROSSENTROPY_NAMES = ("crossentropy", "ce")


class ObjectiveError(UserError):
    """A loss or metric name the run file gives that Keras does not know."""


@dataclass(frozen=True)
class Objective:
    """A per-example loss or metric `fn(y_true, y_pred)` as the run file named it. [B] labels
    get a trailing axis for [B, 1] outputs, as compile does. `labels` is what it expects:
    "same" (the output's shape), "sparse" (class indices), "auto" (chosen from the shapes)
    or "any" (the user's own function: not checked)."""

    fn: Callable[[Any, Any], Any]
    name: str
    where: str  # the run-file key (or the compiled model) it came from
    labels: str = "any"

    def __call__(self, y_true: Any, y_pred: Any) -> Any:
        return self.fn(match_rank(y_true, y_pred), y_pred)


def _get_or_none(getter: Callable[[str], Any], name: str) -> Any:
    try:
        return getter(name)
    except (ValueError, TypeError):
        return None


def _labels_kind(name: str, obj: Any) -> str:
    """'sparse' or 'same' for Keras's own losses and metrics, 'any' for the user's."""
    module = getattr(obj, "__module__", "") or type(obj).__module__
    if not module.startswith("keras"):
        return "any"
    text = f"{name} {getattr(obj, '__name__', type(obj).__name__)}".lower()
    return "sparse" if "sparse" in text else "same"


# ---- shape-resolved names, as compile does -------------------------------------------------
def binary_or_sparse(y_true: Any, y_pred: Any) -> tuple[bool, bool]:
    """(binary, sparse categorical) from the static shapes: compile's own rule
    (keras/src/trainers/compile_utils.py: is_binary_or_sparse_categorical)."""
    t_rank, p_rank = len(y_true.shape), len(y_pred.shape)
    t_last = y_true.shape[-1] if t_rank else None
    p_last = y_pred.shape[-1] if p_rank else None
    binary = p_last == 1
    sparse = t_rank < p_rank or (t_last == 1 and p_last is not None and p_last > 1)
    return binary, sparse


def _by_shapes(kind: str, from_logits: bool = False) -> Callable[[Any, Any], Any]:
    """accuracy or crossentropy, binary / sparse / categorical by the shapes at trace time."""
    import keras

    if kind == "accuracy":
        table = (
            keras.metrics.binary_accuracy,
            keras.metrics.sparse_categorical_accuracy,
            keras.metrics.categorical_accuracy,
        )
    else:
        table = (
            keras.losses.binary_crossentropy,
            keras.losses.sparse_categorical_crossentropy,
            keras.losses.categorical_crossentropy,
        )

    def call(y_true: Any, y_pred: Any) -> Any:
        binary, sparse = binary_or_sparse(y_true, y_pred)
        fn = table[0] if binary else table[1] if sparse else table[2]
        return fn(y_true, y_pred, from_logits=True) if from_logits else fn(y_true, y_pred)

    return call


def _shape_resolved(spec: Any, where: str) -> Objective | None:
    if not isinstance(spec, str):
        return None
    base = spec.lower().removesuffix(LOGITS_SUFFIX)
    logits = spec.lower().endswith(LOGITS_SUFFIX)
    if base in ACCURACY_NAMES and not logits:
        return Objective(_by_shapes("accuracy"), spec, where, "auto")
    if base in CROSSENTROPY_NAMES:
        return Objective(_by_shapes("crossentropy", logits), spec, where, "auto")
    return None


# ---- losses and metrics by name --------------------------------------------------------------
def resolve_loss(spec: Any, where: str) -> Objective:
    """A per-example loss from a name, a Loss object or a function."""
    import keras

    resolved = _shape_resolved(spec, where)
    if resolved is not None:
        return resolved
    obj = None
    if isinstance(spec, str) and spec.endswith(LOGITS_SUFFIX):
        # 'binary_crossentropy_from_logits': a run file's way to say from_logits=True.
        fn = _get_or_none(keras.losses.get, spec.removesuffix(LOGITS_SUFFIX))
        if fn is not None:
            return Objective(
                lambda y, p: fn(y, p, from_logits=True), spec, where, _labels_kind(spec, fn)
            )
    elif isinstance(spec, str):
        obj = _get_or_none(keras.losses.get, spec)
    else:
        obj = spec
    if obj is None:
        raise ObjectiveError(
            f"{where}: expected a Keras loss name (mse, binary_crossentropy, crossentropy, "
            f"binary_crossentropy{LOGITS_SUFFIX}, ...), found {quoted(spec)}"
        )
    name = metric_name(spec)
    if isinstance(obj, keras.losses.Loss):
        # the unreduced per-example values (no reduction, no mask)
        return Objective(obj.call, name, where, _labels_kind(name, obj))
    if callable(obj):
        return Objective(obj, name, where, _labels_kind(name, obj))
    raise ObjectiveError(
        f"{where}: expected a loss function or keras.losses.Loss, found {quoted(spec)}"
    )


def metric_name(spec: Any) -> str:
    return spec if isinstance(spec, str) else getattr(spec, "name", getattr(spec, "__name__", "m"))


@dataclass(frozen=True)
class Stateful:
    """A Keras metric with state (AUC, Precision, Recall, MeanIoU, ...): updated batch by
    batch and read at the end, as fit and evaluate report it. Its labels are not checked."""

    metric: Any  # a fresh keras.metrics.Metric, its own for this output
    name: str
    where: str
    labels: str = "any"


def fresh_metric(metric: Any) -> Any:
    """A new instance of a Keras metric object (one per output and per build: an instance
    the user compiled with keeps its own state)."""
    try:
        return type(metric).from_config(metric.get_config())
    except Exception:  # noqa: BLE001 - a metric without a working config: the object itself
        return metric


def resolve_metric(spec: Any, where: str) -> Objective | Stateful:
    """A per-example metric function (reduced like the loss across replicas and steps), or
    a stateful Keras metric (AUC, Precision, ...) updated batch by batch."""
    import keras

    name = metric_name(spec)
    resolved = _shape_resolved(spec, where)
    if resolved is not None:
        return resolved
    try:
        obj = keras.metrics.get(spec) if isinstance(spec, str) else spec
    except ValueError:
        obj = None
    fn = getattr(obj, "_fn", None)  # MeanMetricWrapper (mae, binary_accuracy, ...)
    if fn is not None:
        kwargs = dict(getattr(obj, "_fn_kwargs", {}) or {})
        return Objective(lambda y, p: fn(y, p, **kwargs), name, where, _labels_kind(name, fn))
    if isinstance(obj, keras.metrics.Metric):
        return Stateful(fresh_metric(obj), name, where)
    if callable(obj):
        return Objective(obj, name, where, _labels_kind(name, obj))
    raise ObjectiveError(
        f"{where}: expected a Keras metric name or object (e.g. mae, accuracy, auc, "
        f"keras.metrics.AUC()), found {quoted(spec)}"
    )


# ---- shapes and reduction --------------------------------------------------------------------
def match_rank(labels: Any, preds: Any) -> Any:
    """[B] labels for [B, 1] predictions get the trailing axis, as Keras' compile does."""
    import tensorflow as tf

    if not (tf.is_tensor(labels) and tf.is_tensor(preds)):
        return labels
    if labels.shape.rank is not None and labels.shape.rank == preds.shape.rank - 1:
        return tf.expand_dims(labels, -1)
    return labels


def to_float32(t: Any) -> Any:
    import tensorflow as tf

    return tf.cast(t, tf.float32) if t.dtype.is_floating else t


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
