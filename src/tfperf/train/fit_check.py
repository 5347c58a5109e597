"""Before the first step: the dataset yields (features, labels) batches, the model runs on
the features, and its output fits the labels that the loss and each metric expect. Each
mismatch is one paragraph naming both sides and what to change, instead of an error from
deep inside a traced function.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.inputs.user_code import describe_failure
from tfperf.train.label_range import explain, from_kernel_error, label_span, out_of_range
from tfperf.train.model import adapt_features, zeros_batch
from tfperf.train.objectives import Objective, Stateful, binary_or_sparse, match_rank
from tfperf.train.outputs import Objectives, Wanted, bind, pick
from tfperf.util.imports import load_object

if TYPE_CHECKING:
    import keras


class FitError(UserError):
    """The run file's model does not fit its data (inputs, output or labels)."""


def _shape(spec: Any, batch: int) -> tuple[int | None, ...]:
    """A static shape with an unknown batch axis shown as the batch size."""
    dims = list(spec.shape.as_list()) if spec.shape.rank is not None else []
    return tuple(batch if (i == 0 and d is None) else d for i, d in enumerate(dims))


def _shapes(struct: Any, batch: int) -> str:
    if isinstance(struct, dict):
        return (
            "{" + ", ".join(f"'{k}': {_shape(v, batch)}" for k, v in sorted(struct.items())) + "}"
        )
    return str(_shape(struct, batch))


def model_home(cfg: RunConfig) -> str:
    """Where the model is written: the model.name function's file, or the workload."""
    if not cfg.model.name:
        return f"workload {cfg.workload}'s model"
    here = str(Path(cfg.source).parent) if cfg.source else None
    try:
        fn = load_object(cfg.model.name, field="model.name", search_dir=here)
        return f"{cfg.model.name} ({inspect.getsourcefile(fn)})"
    except (UserError, TypeError):
        return cfg.model.name


# ---- the batch structure ---------------------------------------------------------------------
def split_batch(cfg: RunConfig, spec: Any) -> tuple[Any, Any]:
    """(features spec, labels spec) of the dataset's batches, or a FitError saying how to
    make (features, labels) pairs."""
    if isinstance(spec, (tuple, list)) and len(spec) in (2, 3):  # (x, y) or (x, y, sample_weight)
        return spec[0], spec[1]
    found = (
        _shapes(spec, cfg.pipeline.batch_size)
        if hasattr(spec, "shape") or isinstance(spec, dict)
        else repr(spec)
    )
    if cfg.data.pipeline:
        raise FitError(
            f"data.pipeline: training needs (features, labels) batches, but "
            f"{cfg.data.pipeline} yields {found}; return ds.map(lambda b: (features, label)) "
            "from that function"
        )
    names = sorted(spec) if isinstance(spec, dict) else []
    raise FitError(
        f"data.label: training needs to know which feature is the label, found nothing set "
        f"(the batches hold {found}); set data.label to one of {names} in "
        f"{cfg.source or 'the run file'} (or --set data.label=NAME): the model then receives "
        "the other features as a dict keyed by name"
    )


# ---- the model on one batch of zeros ---------------------------------------------------------
def _input_names(model: keras.Model) -> list[str]:
    struct = getattr(model, "_inputs_struct", None)  # a functional model's input structure
    if isinstance(struct, dict):
        return sorted(struct)
    inputs = getattr(model, "inputs", None) or []
    return [getattr(t, "name", "").split(":")[0] for t in inputs]


def _unbatched(model: keras.Model, features_spec: Any) -> bool:
    """Whether every feature has one axis fewer than the model input that takes it: the
    pipeline then yields single examples (a missing .batch), not batches."""
    import tensorflow as tf

    inputs = getattr(model, "inputs", None) or []
    specs = tf.nest.flatten(features_spec)
    if not inputs or len(inputs) != len(specs) or any(s.shape.rank is None for s in specs):
        return False
    ranks = sorted(len(t.shape) for t in inputs if getattr(t, "shape", None) is not None)
    return len(ranks) == len(specs) and ranks == sorted(s.shape.rank + 1 for s in specs)


def needs_real_batch(spec: Any) -> bool:
    """Whether zeros shaped like `spec` could not stand in for a batch: an unknown axis
    besides the batch (windows, frames, images of any size), strings (a StringLookup fails
    on ""), ragged or sparse components."""
    import tensorflow as tf

    for s in tf.nest.flatten(spec):
        if not isinstance(s, tf.TensorSpec) or s.dtype == tf.string:
            return True
        if s.shape.rank is None or None in s.shape.as_list()[1:]:
            return True
    return False


def _real_shapes(features: Any) -> str:
    import tensorflow as tf

    def shape(t: Any) -> Any:
        return tuple(t.shape.as_list()) if isinstance(t, tf.Tensor) else type(t).__name__

    if isinstance(features, dict):
        return "{" + ", ".join(f"'{k}': {shape(v)}" for k, v in sorted(features.items())) + "}"
    return str(tf.nest.map_structure(shape, features))


def run_on_zeros(
    cfg: RunConfig, model: keras.Model, features_spec: Any, sample: Callable[[], Any] | None = None
) -> Any:
    """The model's output on one batch (this builds its variables): zeros shaped like the
    features, or the real batch `sample()` gives where zeros cannot stand in for it; a
    failure names the model's inputs and the features."""
    real = None
    if sample is not None and needs_real_batch(features_spec):
        real = sample()
    try:
        features = real if real is not None else zeros_batch(features_spec)
        return model(adapt_features(model, features), training=False)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the model raises is reported
        inputs = _input_names(model)
        if _unbatched(model, features_spec):  # the pipeline's mistake, not the model's
            where = cfg.data.pipeline or "the pipeline"
            hint = (
                f"the features have no batch axis (the model's inputs have one more): "
                f"{where} yields single examples; end it with .batch(batch_size)"
            )
        elif isinstance(features_spec, dict) and inputs and not set(inputs) <= set(features_spec):
            hint = (
                "name each keras.Input after the feature it takes (keras.Input(shape=..., "
                f"name=NAME), NAME one of {sorted(features_spec)}) in {model_home(cfg)}"
            )
        else:
            hint = f"fix the model in {model_home(cfg)}"
        label = f" (data.label '{cfg.data.label}' removed)" if cfg.data.label else ""
        if real is not None:
            found = f"{_real_shapes(real)} (a real batch)"
        else:
            found = _shapes(features_spec, cfg.pipeline.batch_size)
        raise FitError(
            f"model.name: calling the model on one batch of the features failed: its "
            f"inputs {inputs or '(unnamed)'}{_expected(model)} vs the features "
            f"{found}{label}: "
            f"{describe_failure(exc)}; {hint}"
        ) from None


def _expected(model: keras.Model) -> str:
    """' expecting (None, 120, 7)': the shapes the model's inputs declare, when it has them."""
    shapes = [tuple(t.shape) for t in getattr(model, "inputs", None) or [] if hasattr(t, "shape")]
    if not shapes:
        return ""
    return f" expecting {shapes[0] if len(shapes) == 1 else shapes}"


# ---- the output against the labels -----------------------------------------------------------
def _tail(shape: Any) -> tuple[Any, ...]:  # ints, None where unknown
    return tuple(shape.as_list()[1:]) if shape.rank is not None else ()


def label_problem(kind: str, out: Any, labels: Any) -> str | None:
    """Why labels of static shape `labels` cannot be compared with outputs of shape `out` by
    a loss or metric expecting `kind` labels (see Objective.labels); None when they fit."""
    if kind == "any" or out.rank in (None, 0) or labels.rank is None:
        return None
    # Ranks one apart by a trailing 1 are fine: [B] labels for [B, 1] outputs get the axis
    # (match_rank, as compile does), [B, 1] labels for [B] outputs lose it (Keras's losses).
    lab = labels.concatenate([1]) if labels.rank == out.rank - 1 else labels
    if lab.rank == out.rank + 1 and lab[-1] == 1:
        lab = lab[:-1]
    if None in _tail(out) or None in _tail(lab):
        return None  # known only when it runs
    # Values per example: a [B] output or label holds one.
    units, per_label = (_tail(out) or (1,))[-1], (_tail(lab) or (1,))[-1]
    if kind == "auto":  # compile's choice: binary, else sparse, else categorical
        binary, sparse = binary_or_sparse(_Static(lab), _Static(out))
        kind = "sparse" if sparse and not binary else "same"
    # An axis left in the output (a sequence or spatial one); class indices carry no class
    # axis, and may carry a trailing 1.
    bare = labels.rank - (1 if labels.rank > 1 and labels[-1] == 1 else 0)
    extra = out.rank - 1 - bare if kind == "sparse" else out.rank - lab.rank
    if extra > 0:
        return (
            f"the output has {extra} more {'axis' if extra == 1 else 'axes'} per example than "
            f"the labels ({_tail(out)} vs {_tail(labels) or 'one value'}): reduce it before "
            "the last layer (Flatten, GlobalAveragePooling1D/2D, or return_sequences=False "
            "on the last recurrent layer)"
        )
    if kind == "sparse":
        if units == 1:
            return (
                "class indices need one output per class and the model has 1: for 0/1 "
                "labels use binary_crossentropy (or crossentropy)"
            )
        if per_label != 1:
            return (
                f"labels with {per_label} values per example look one-hot: use "
                "categorical_crossentropy (or crossentropy)"
            )
        return None if _tail(lab)[:-1] == _tail(out)[:-1] else "make the shapes match"
    if _tail(lab) == _tail(out):
        return None
    if per_label == 1 and units > 1:
        return (
            "for integer class labels use sparse_categorical_crossentropy (or crossentropy, "
            "chosen from the shapes); for one value per example give the last layer 1 unit"
        )
    if units == 1 and per_label > 1:
        return f"give the model's last layer {per_label} units (one per label value)"
    return "make the model's output shape match the labels"


class _Static:
    """A bare static shape for binary_or_sparse, which reads only `.shape`."""

    def __init__(self, shape: Any):
        self.shape = tuple(shape.as_list())


def check_outputs(
    cfg: RunConfig, out: Any, labels_spec: Any, objectives: Sequence[Objective | Stateful]
) -> None:
    """A FitError when the model output's shape does not fit the labels for the loss or a
    metric (single-output models with single labels; others are left to the first step)."""
    import tensorflow as tf

    if not (tf.is_tensor(out) and isinstance(labels_spec, tf.TensorSpec)):
        return
    batch = cfg.pipeline.batch_size
    out_shape = (batch, *out.shape.as_list()[1:])
    for obj in objectives:
        hint = label_problem(obj.labels, out.shape, labels_spec.shape)
        if hint is None:
            continue
        raise FitError(
            f"{obj.where}: checking the model against the data, model output {out_shape} vs "
            f"labels {_shape(labels_spec, batch)} for '{obj.name}': {hint}; change {obj.where} "
            f"in {cfg.origin(obj.where)}, or the model ({model_home(cfg)})"
        )


def takes_class_indices(obj: Objective | Stateful, out: Any, labels: Any) -> bool:
    """Whether `obj` reads the labels as class indices for outputs of static shape `out`."""
    if obj.labels == "sparse":
        return True
    if obj.labels != "auto" or out.rank in (None, 0) or labels.rank is None:
        return False
    binary, sparse = binary_or_sparse(_Static(labels), _Static(out))
    return sparse and not binary


def check_label_range(
    cfg: RunConfig, out: Any, labels: Any, objectives: Sequence[Objective | Stateful], seen: str
) -> None:
    """A FitError when real class-index `labels` reach past the model's output units."""
    import tensorflow as tf

    units = out.shape[-1] if out.shape.rank else None
    if not (units and units > 1 and tf.is_tensor(labels)):
        return
    span = label_span(labels)
    if span is None or not out_of_range(span, units):
        return
    for obj in objectives:
        if takes_class_indices(obj, out.shape, labels.shape):
            data = cfg.data.pipeline or f"workload {cfg.workload}'s data"
            raise FitError(explain(obj.where, obj.name, span, units, seen, model_home(cfg), data))


def check_fit(
    cfg: RunConfig,
    model: keras.Model,
    spec: Any,
    wanted: Wanted,
    sample: Callable[[], Any] | None = None,
    *,
    metrics: bool = True,
) -> Objectives:
    """Runs the model once on a batch's features (building it), pairs its outputs with the
    labels and the loss, loss weights and metrics `wanted` (train/outputs.py), and checks
    each output against its labels; call inside the strategy's scope. `sample()` gives one
    real batch of the dataset, used where zeros cannot stand in for it (needs_real_batch).
    Returns the paired objectives; `metrics=False` leaves the metrics out."""
    import tensorflow as tf

    features_spec, labels_spec = split_batch(cfg, spec)

    def features() -> Any:  # the real batch's features, when sample() gives one
        batch = sample() if sample is not None else None
        return split_batch(cfg, batch)[0] if batch is not None else None

    out = run_on_zeros(cfg, model, features_spec, features)
    batch = cfg.pipeline.batch_size
    where = cfg.data.pipeline or "the pipeline"
    fix = (
        f"return the labels from {where} as a dict keyed by the output names (or a list in "
        f"the outputs' order), or change the model's outputs in {model_home(cfg)}"
    )
    objectives = bind(wanted, model, out, labels_spec, batch=batch, fix=fix, metrics=metrics)
    for head in objectives.heads:
        check_outputs(
            cfg, pick(out, head.pred_key), pick(labels_spec, head.label_key), head.checked
        )
    build_stateful(cfg, objectives, out, labels_spec)
    if sample is None:
        return objectives
    for head in objectives.heads:
        o, lab = pick(out, head.pred_key), pick(labels_spec, head.label_key)
        if not (tf.is_tensor(o) and isinstance(lab, tf.TensorSpec)):
            continue
        if any(takes_class_indices(x, o.shape, lab.shape) for x in head.checked):
            real = sample()  # the real labels: zeros cannot show their range
            if real is not None:
                labels = pick(split_batch(cfg, real)[1], head.label_key)
                check_label_range(cfg, o, labels, head.checked, "the first batch")
    return objectives


def build_stateful(cfg: RunConfig, objectives: Objectives, out: Any, labels_spec: Any) -> None:
    """Creates the stateful metrics' variables now (not while the train function is traced)
    by updating each once on zeros labels, then resets them; a metric that cannot read these
    outputs and labels is named."""
    if not objectives.stateful:
        return
    import tensorflow as tf

    try:
        for head in objectives.heads:
            o, spec = pick(out, head.pred_key), pick(labels_spec, head.label_key)
            if not head.stateful or not tf.is_tensor(o):
                continue
            # Zeros labels as many as the output's rows (a real batch may have stood in).
            dims = [1 if d is None else d for d in spec.shape.as_list()[1:]]
            labels = tf.zeros([o.shape[0] or 1, *dims], spec.dtype)
            for _, s in head.stateful:
                s.metric.update_state(match_rank(labels, o), o)
    except Exception as exc:  # noqa: BLE001 - whatever the metric raises is reported
        names = [n for n, _ in objectives.stateful]
        raise FitError(
            f"model.metrics: the stateful metric(s) {names} cannot read the model's outputs "
            f"and the labels: {describe_failure(exc)}; change model.metrics in "
            f"{cfg.origin('model.metrics')}"
        ) from None
    objectives.reset_stateful()


@contextmanager
def class_labels_named(cfg: RunConfig) -> Iterator[None]:
    """TensorFlow's out-of-range label error from a training step (a batch after the first
    held a larger class index) as the same paragraph the check before training gives."""
    import tensorflow as tf

    try:
        yield
    except tf.errors.InvalidArgumentError as exc:
        found = from_kernel_error(exc)
        if found is None:
            raise
        label, units = found
        data = cfg.data.pipeline or f"workload {cfg.workload}'s data"
        where = "model.loss" if cfg.model.loss else "model.metrics"
        name = cfg.model.loss or "a metric"
        raise FitError(
            explain(
                where, str(name), (label, label), units, "a training batch", model_home(cfg), data
            )
        ) from None
