"""The model's outputs paired with the labels, and with the loss, loss weight and metrics
given for each, as Keras' compile pairs them: one output or several (a list, or a dict keyed
by output name); a loss, loss weights and metrics given once for every output, as a list in
the outputs' order or as a dict keyed by output name; labels as one tensor, a list or a
dict; and a sample weight per example (the third element of (x, y, sw) batches). A
mismatch between the outputs and the labels (or the keys) is one paragraph naming both.

`Wanted` is what the run file, the compiled model or the workload gives; `bind` pairs it with
the model's output on one batch and the labels' spec, once, before training; the train step
and the evaluator then read the resulting `Objectives`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tfperf.errors import UserError
from tfperf.train.objectives import (
    Objective,
    Stateful,
    match_rank,
    per_example,
    resolve_loss,
    resolve_metric,
)

Key = int | str | None  # how to pick one output (or label) from the structure: None: itself


class OutputsError(UserError):
    """The model's outputs do not pair with the labels, or with the keys given per output."""


@dataclass(frozen=True)
class Wanted:
    """The loss, loss weights and metrics as given, not yet paired with the outputs; each
    `*_where` names where it came from (a run-file key or the compiled model)."""

    loss: Any
    loss_where: str = "model.loss"
    weights: Any = None
    weights_where: str = "model.loss_weights"
    metrics: Any = None
    metrics_where: str = "model.metrics"


@dataclass
class Head:
    """One output of the model with its label, loss, loss weight and metrics."""

    name: str | None  # the output's name (None: a single unnamed output)
    pred_key: Key
    label_key: Key
    loss: Objective | None
    weight: float = 1.0
    metrics: list[tuple[str, Objective]] = field(default_factory=list)  # (logged name, fn)
    stateful: list[tuple[str, Stateful]] = field(default_factory=list)

    @property
    def checked(self) -> list[Objective | Stateful]:
        """Everything that reads this output's labels (what fit_check checks)."""
        found: list[Objective | Stateful] = [self.loss] if self.loss is not None else []
        return found + [m for _, m in self.metrics] + [m for _, m in self.stateful]


def pick(struct: Any, key: Key) -> Any:
    return struct if key is None else struct[key]


@dataclass
class Objectives:
    """The bound heads: per-example losses (weighted and summed over the outputs) and
    metrics, and the stateful Keras metrics (AUC, Precision, ...) to update and read."""

    heads: list[Head]

    @classmethod
    def single(
        cls, loss: Callable[..., Any], metrics: dict[str, Callable[..., Any]] | None = None
    ) -> Objectives:
        """One output, one label, a loss function and per-example metric functions."""
        objs = [(k, _as_objective(fn, k)) for k, fn in (metrics or {}).items()]
        return cls([Head(None, None, None, _as_objective(loss, "loss"), metrics=objs)])

    @property
    def loss_names(self) -> list[str]:
        """The per-output losses logged as metrics (fit's `count_loss`), when several."""
        named = [h for h in self.heads if h.loss is not None]
        return [f"{h.name}_loss" for h in named] if len(named) > 1 else []

    @property
    def per_example_names(self) -> list[str]:
        return self.loss_names + [n for h in self.heads for n, _ in h.metrics]

    @property
    def stateful(self) -> list[tuple[str, Any]]:
        """(logged name, keras.metrics.Metric) of every output."""
        return [(n, s.metric) for h in self.heads for n, s in h.stateful]

    @property
    def names(self) -> list[str]:
        """Every metric logged, in order (per-output losses, per-example, stateful)."""
        return self.per_example_names + [n for n, _ in self.stateful]

    @property
    def checked(self) -> list[Objective | Stateful]:
        return [o for h in self.heads for o in h.checked]

    def losses(
        self, labels: Any, preds: Any, sample_weight: Any = None
    ) -> tuple[Any, dict[str, Any]]:
        """(the total loss per example: each output's loss times its weight, summed; each
        output's unweighted per-example loss by logged name, when several)."""
        import tensorflow as tf

        total: Any = None
        each: dict[str, Any] = {}
        with_loss = [id(h) for h in self.heads if h.loss is not None]
        # Only several outputs log their own losses (loss_names is empty for one).
        names = dict(zip(with_loss, self.loss_names, strict=False))
        for h in self.heads:
            if h.loss is None:
                continue
            values = tf.cast(h.loss(pick(labels, h.label_key), pick(preds, h.pred_key)), tf.float32)
            if sample_weight is not None:
                values = weighted(values, _weight_of(sample_weight, h))
            per = per_example(values)
            if id(h) in names:
                each[names[id(h)]] = per
            per = per * h.weight if h.weight != 1.0 else per
            total = per if total is None else total + per
        if total is None:
            raise UserError("model.loss: no output of the model has a loss")
        return total, each

    def metric_values(self, labels: Any, preds: Any) -> dict[str, Any]:
        """Each per-example metric's values (unweighted, as compile's `metrics` are)."""
        import tensorflow as tf

        out = {}
        for h in self.heads:
            y, p = pick(labels, h.label_key), pick(preds, h.pred_key)
            for name, fn in h.metrics:
                out[name] = per_example(tf.cast(fn(y, p), tf.float32))
        return out

    def update_stateful(self, labels: Any, preds: Any) -> list[Any]:
        """Updates each stateful metric with one batch; returns the update ops."""
        ops = []
        for h in self.heads:
            y, p = pick(labels, h.label_key), pick(preds, h.pred_key)
            for _, s in h.stateful:
                ops.append(s.metric.update_state(match_rank(y, p), p))
        return ops

    def reset_stateful(self) -> None:
        for _, metric in self.stateful:
            metric.reset_state()


def _as_objective(fn: Any, name: str) -> Objective:
    return fn if isinstance(fn, Objective) else Objective(fn, name, "the train step")


def _weight_of(sample_weight: Any, head: Head) -> Any:
    """The head's sample weights: one tensor for every output, or its entry of a list or
    dict keyed as the labels are."""
    key = head.label_key
    if isinstance(sample_weight, dict) and key is not None:
        return sample_weight[key]
    if isinstance(sample_weight, (list, tuple)) and isinstance(key, int):
        return sample_weight[key]
    return sample_weight


def weighted(values: Any, sample_weight: Any) -> Any:
    """Loss values times their examples' weights ([B] or [B, 1] weights broadcast over the
    values' other axes), as Keras' losses weigh them before the mean over the batch."""
    import tensorflow as tf

    sw = tf.cast(sample_weight, values.dtype)
    if sw.shape.rank is not None and values.shape.rank is not None:
        if sw.shape.rank > values.shape.rank and sw.shape[-1] == 1:
            sw = tf.squeeze(sw, -1)
        while sw.shape.rank < values.shape.rank:
            sw = tf.expand_dims(sw, -1)
    return values * sw


# ---- pairing ---------------------------------------------------------------------------------
def output_heads(model: Any, out: Any) -> tuple[list[str | None], list[Key]]:
    """(the outputs' names, how to pick each from the model's output)."""
    declared = [str(n) for n in (getattr(model, "output_names", None) or [])]
    if isinstance(out, dict):
        names = declared if set(declared) == set(out) else sorted(out)
        return list(names), list(names)
    if isinstance(out, (list, tuple)):
        names = declared if len(declared) == len(out) else [f"output_{i}" for i in range(len(out))]
        return list(names), list(range(len(out)))
    return [declared[0] if len(declared) == 1 else None], [None]


def describe(struct: Any, batch: int) -> str:
    """A structure of tensors or specs as its shapes: {'count': (8, 1)}, [(8, 1), (8, 3)]."""

    def shape(t: Any) -> str:
        dims = t.shape.as_list() if getattr(t.shape, "rank", 0) is not None else []
        return str(tuple(batch if i == 0 and d is None else d for i, d in enumerate(dims)))

    if isinstance(struct, dict):
        return "{" + ", ".join(f"'{k}': {describe(v, batch)}" for k, v in struct.items()) + "}"
    if isinstance(struct, (list, tuple)):
        return "[" + ", ".join(describe(v, batch) for v in struct) + "]"
    return shape(struct) if hasattr(struct, "shape") else repr(struct)


def per_output(
    spec: Any, names: Sequence[str | None], where: str, what: str, *, same_for_all: bool = True
) -> list[Any]:
    """`spec` for each output: a dict keyed by output name (missing: None), a list in the
    outputs' order, or one value for every output."""
    n = len(names)
    known = [x for x in names if x is not None]
    if spec is None:
        return [None] * n
    if isinstance(spec, dict):
        if n == 1 and len(spec) == 1 and (names[0] is None or names[0] not in spec):
            return list(spec.values())  # one output: its one entry, whatever its key
        unknown = [k for k in spec if k not in names]
        if unknown:
            raise OutputsError(
                f"{where}: expected a {what} per output keyed by the model's output names "
                f"{known}, found the key(s) {unknown} (in {sorted(spec)}); name each output "
                "(the last layer's name=, or a dict of outputs) or key the entries by those names"
            )
        return [spec.get(x) for x in names]
    if isinstance(spec, (list, tuple)):
        if len(spec) != n:
            raise OutputsError(
                f"{where}: expected one {what} per output ({n}: {known or 'one output'}), "
                f"found a list of {len(spec)}: {list(spec)}; give a list of {n} in the "
                f"outputs' order, a dict keyed by output name, or one {what} for every output"
            )
        return list(spec)
    if not same_for_all and n > 1:
        raise OutputsError(f"{where}: expected a list or dict of {n} entries, found {spec!r}")
    return [spec] * n


def metrics_per_output(spec: Any, names: Sequence[str | None], where: str) -> list[list[Any]]:
    """Each output's metric list, as compile reads `metrics`: for one output every metric
    given (a dict's values too); for several, a dict keyed by output name or a list with an
    entry (a name or a list) per output; a flat list of another length applies to each."""

    def as_list(entry: Any) -> list[Any]:
        if entry is None:
            return []
        return list(entry) if isinstance(entry, (list, tuple)) else [entry]

    if not spec:
        return [[] for _ in names]
    if len(names) == 1:
        values = spec.values() if isinstance(spec, dict) else as_list(spec)
        return [[m for v in values for m in as_list(v)]]
    if isinstance(spec, dict):
        return [as_list(e) for e in per_output(spec, names, where, "metric list")]
    entries = as_list(spec)
    if len(entries) == len(names):
        return [as_list(e) for e in entries]
    return [list(entries) for _ in names]


def pair_labels(
    names: list[str | None],
    needed: list[bool],
    labels: Any,
    out: Any,
    batch: int,
    fix: str,
) -> list[Key]:
    """How to pick each output's labels from the labels' structure; an OutputsError naming
    both structures when they do not pair."""
    n = len(names)

    def mismatch(why: str) -> OutputsError:
        return OutputsError(
            f"model.name: the model's outputs {describe(out, batch)} do not pair with the "
            f"labels {describe(labels, batch)}: {why}; {fix}"
        )

    if n == 1:
        if not needed[0]:
            return [None]  # nothing reads the labels (the doctor's stand-in): any structure
        if isinstance(labels, dict):
            if len(labels) == 1:
                return [next(iter(labels))]
            if names[0] in labels:
                return [names[0]]
            raise mismatch(
                f"one output{_named(names[0])} and {len(labels)} labels {sorted(labels)}"
            )
        if isinstance(labels, (list, tuple)):
            if len(labels) == 1:
                return [0]
            raise mismatch(f"one output and {len(labels)} labels")
        return [None]
    shown = [x for x in names if x is not None]
    if isinstance(labels, dict):
        missing = [x for x, want in zip(names, needed, strict=True) if want and x not in labels]
        if missing:
            raise mismatch(
                f"no label for the output(s) {missing} (the labels are keyed {sorted(labels)}, "
                f"the outputs named {shown})"
            )
        return list(names)
    if isinstance(labels, (list, tuple)):
        if len(labels) != n:
            raise mismatch(f"{n} outputs and {len(labels)} labels")
        return list(range(n))
    raise mismatch(f"{n} outputs {shown} and one label tensor")


def _named(name: str | None) -> str:
    return f" ('{name}')" if name else ""


def bind(
    wanted: Wanted,
    model: Any,
    out: Any,
    labels: Any,
    *,
    batch: int,
    fix: str,
    metrics: bool = True,
) -> Objectives:
    """Pairs `wanted` with the model's output on one batch `out` and the labels' spec
    (`labels`); `metrics=False` leaves every metric out (the doctor times the bare step).
    `batch` shows unknown batch axes, `fix` says where the labels are made."""
    names, keys = output_heads(model, out)
    several = len(names) > 1
    losses = per_output(wanted.loss, names, wanted.loss_where, "loss")
    weights = per_output(wanted.weights, names, wanted.weights_where, "loss weight")
    wanted_metrics = (
        metrics_per_output(wanted.metrics, names, wanted.metrics_where)
        if metrics
        else [[] for _ in names]
    )
    heads = []
    for name, key, loss, weight, listed in zip(
        names, keys, losses, weights, wanted_metrics, strict=True
    ):
        at = f"['{name}']" if several else ""
        head = Head(
            name,
            key,
            None,
            resolve_loss(loss, wanted.loss_where + at) if loss is not None else None,
            _weight(weight, wanted.weights_where + at),
        )
        for m in listed:
            obj = resolve_metric(m, wanted.metrics_where + at)
            logged = f"{name}_{obj.name}" if several else obj.name
            if isinstance(obj, Stateful):
                head.stateful.append((logged, obj))
            else:
                head.metrics.append((logged, obj))
        heads.append(head)
    if all(h.loss is None for h in heads):
        raise OutputsError(
            f"{wanted.loss_where}: expected a loss for at least one of the outputs "
            f"{[n for n in names if n]}, found {wanted.loss!r}"
        )
    # An objective marked `reads_labels = False` (the doctor's stand-in loss) pairs with any.
    needed = [
        any(getattr(getattr(o, "fn", o), "reads_labels", True) for o in h.checked) for h in heads
    ]
    for head, label_key in zip(
        heads, pair_labels(names, needed, labels, out, batch, fix), strict=True
    ):
        head.label_key = label_key
    _dedupe(heads)
    return Objectives(heads)


def _weight(value: Any, where: str) -> float:
    if value is None:
        return 1.0
    try:
        return float(value)
    except (TypeError, ValueError):
        raise OutputsError(f"{where}: expected a number, found {value!r}") from None


def _dedupe(heads: list[Head]) -> None:
    """Logged names made unique as compile makes them (a second 'auc' becomes 'auc_1')."""
    seen: dict[str, int] = {}

    def unique(name: str) -> str:
        if name not in seen:
            seen[name] = 1
            return name
        seen[name] += 1
        return f"{name}_{seen[name] - 1}"

    for h in heads:
        h.metrics = [(unique(n), o) for n, o in h.metrics]
        h.stateful = [(unique(n), o) for n, o in h.stateful]
