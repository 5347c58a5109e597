"""The model, its loss and metrics from the run file, and the compiled multi-step train
function: one tf.function runs `n` steps in a tf.range loop (as Orbit does), pulling each
batch from the distributed iterator inside the graph.

Input wait is measured in the graph: tf.timestamp() just before and just after
`next(iterator)`, summed over the loop. Pulling batches in Python would add a host round
trip per step (the very cost of feeding numpy batches through feed_dict) and stacking
windows breaks under distribution; in-graph timestamps cost two scalar ops per step and
time exactly the dequeue from the prefetch buffer, on every strategy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from tfperf.errors import UserError
from tfperf.util.imports import load_object


class RetraceError(UserError):
    """The train function was traced a second time: an input changed shape or dtype."""


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
        here = str(__import__("pathlib").Path(cfg.source).parent) if cfg.source else None
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


# ---- the compiled multi-step function -----------------------------------------------------
def describe_signature(iterator: Any, num_steps: Any) -> dict[str, str]:
    """Path -> 'dtype shape' of everything the train function is specialised on."""

    spec = getattr(iterator, "element_spec", None)
    out: dict[str, str] = {}
    if spec is not None:
        for path, s in _flatten_with_paths(spec):
            shape = getattr(s, "shape", None)
            dtype = getattr(s, "dtype", None)
            label = f"{getattr(dtype, 'name', dtype)} {shape}" if shape is not None else repr(s)
            out[f"batch/{path}"] = label
    out["num_steps"] = (
        f"{num_steps.dtype.name} {num_steps.shape}"
        if hasattr(num_steps, "dtype")
        else f"python {type(num_steps).__name__} {num_steps!r}"
    )
    return out


def _flatten_with_paths(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) pairs of nested dicts, tuples and lists: features/x, labels ..."""
    if isinstance(tree, dict):
        items = [(str(k), v) for k, v in sorted(tree.items())]
    elif isinstance(tree, (tuple, list)):
        names = ("features", "labels") if not prefix and len(tree) == 2 else None
        items = [(names[i] if names else str(i), v) for i, v in enumerate(tree)]
    else:
        return [(prefix or "value", tree)]
    out = []
    for key, value in items:
        out += _flatten_with_paths(value, f"{prefix}/{key}" if prefix else key)
    return out


def signature_diff(old: dict[str, str], new: dict[str, str]) -> str:
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "(absent)"), new.get(key, "(absent)")
        if a != b:
            lines.append(f"{key}: {a} -> {b}")
    return "; ".join(lines) or "no input changed (a Python value captured by the function did)"


class TrainStep:
    """Runs `num_steps` optimizer steps per call inside one tf.function.

    Call with (iterator, num_steps as an int32 tensor); returns a dict of tensors:
    loss (mean over the steps), wait_s (input wait summed), and each metric's mean.
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        loss_fn: Callable,
        metric_fns: dict[str, Callable],
        strategy: Any,
        global_batch: int,
        step_var: Any,
        *,
        print_tensors: Sequence[str] = (),
        print_steps: int = 3,
    ):
        import tensorflow as tf

        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.metric_fns, self.strategy = dict(metric_fns), strategy
        self.global_batch, self.step_var = global_batch, step_var
        self.print_names = [n for n in print_tensors if n]
        self.print_steps = print_steps
        self._probe = self._make_probe(model, self.print_names)
        self.traces = 0
        self._retrace_error: RetraceError | None = None
        self.signature: dict[str, str] | None = None
        # reduce_retracing=False: a changed input re-traces (and is reported) instead of
        # silently widening to a slower, shape-generic function.
        self.function = tf.function(self._loop, reduce_retracing=False)

    # The one call site; num_steps is a tensor so that a short last call does not retrace.
    def __call__(self, iterator: Any, num_steps: int, coordinator: Any = None) -> Any:
        """Runs the steps (or, with a ClusterCoordinator, schedules them on a worker and
        returns the RemoteValue)."""
        import tensorflow as tf

        args = (iterator, tf.constant(num_steps, tf.int32))
        try:
            if coordinator is not None:
                return coordinator.schedule(self.function, args=args)
            return self.function(*args)
        except Exception:
            # AutoGraph wraps errors raised while tracing; surface ours unwrapped.
            err, self._retrace_error = self._retrace_error, None
            if err is not None:
                raise err from None
            raise

    def concrete_function(self, iterator: Any) -> Any:
        import tensorflow as tf

        return self.function.get_concrete_function(iterator, tf.TensorSpec([], tf.int32))

    @staticmethod
    def _make_probe(model: Any, names: Sequence[str]) -> Any:
        import keras

        layer_names = [n for n in names if n not in ("loss", "labels")]
        if not layer_names:
            return None
        if not getattr(model, "inputs", None):
            raise UserError(
                "--print-tensors: layer outputs need a functional or Sequential "
                "model with an Input; print 'loss' or 'labels' instead"
            )
        known = [layer.name for layer in model.layers]
        taps = []
        for n in layer_names:
            if n not in known:
                raise UserError(
                    f"--print-tensors: no layer '{n}'; expected one of {known + ['loss', 'labels']}"
                )
            taps.append(model.get_layer(n).output)
        outputs = list(model.outputs)
        return keras.Model(model.inputs, outputs + taps), len(outputs), layer_names

    def _loop(self, iterator: Any, num_steps: Any) -> dict[str, Any]:
        import tensorflow as tf

        # Python runs here only while tracing: a second trace is the retrace to report.
        sig = describe_signature(iterator, num_steps)
        if self.traces and self.signature is not None:
            self._retrace_error = RetraceError(
                "the train function was traced again after its first call, which would "
                f"recompile every step: {signature_diff(self.signature, sig)}. Make every "
                "batch the same shape and dtype (drop_remainder, fixed padding)"
            )
            raise self._retrace_error
        self.traces += 1
        self.signature = sig
        strategy = self.strategy
        loss_sum = tf.constant(0.0, tf.float32)
        wait = tf.constant(0.0, tf.float64)
        names = list(self.metric_fns)
        # One vector, not a dict: AutoGraph carries only named tensors across iterations.
        msums = tf.zeros([len(names)], tf.float32)
        for _ in tf.range(num_steps):
            # The fetch starts after the previous step's loss exists: the wait is the
            # dequeue alone, never overlapped compute.
            with tf.control_dependencies([loss_sum]):
                t0 = tf.timestamp()
            with tf.control_dependencies([t0]):
                batch = next(iterator)
            with tf.control_dependencies(tf.nest.flatten(batch, expand_composites=True)):
                t1 = tf.timestamp()
            wait += t1 - t0
            loss, mvals = strategy.run(self._replica_step, args=(batch,))
            loss_sum += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
            if names:
                msums += tf.stack(
                    [
                        strategy.reduce(tf.distribute.ReduceOp.SUM, mvals[k], axis=None)
                        for k in names
                    ]
                )
            self.step_var.assign_add(1)
        n = tf.cast(tf.maximum(num_steps, 1), tf.float32)
        out = {"loss": loss_sum / n, "wait_s": wait}
        out.update({f"metrics/{k}": msums[i] / n for i, k in enumerate(names)})
        return out

    def _replica_step(self, batch: Any) -> tuple[Any, dict[str, Any]]:
        import tensorflow as tf

        features, labels = batch
        features = adapt_features(self.model, features)
        model, opt = self.model, self.optimizer
        with tf.GradientTape() as tape:
            if self._probe is not None:
                probe, n_out, names = self._probe
                outs = probe(features, training=True)
                preds = outs[0] if n_out == 1 else list(outs[:n_out])
                taps = dict(zip(names, outs[n_out:], strict=True))
            else:
                preds, taps = model(features, training=True), {}
            # The loss is computed in float32 whatever the compute policy (model outputs float32).
            preds = tf.nest.map_structure(_to_float32, preds)
            labels = _match_rank(labels, preds)
            losses = per_example(self.loss_fn(labels, preds))
            loss = tf.nn.compute_average_loss(losses, global_batch_size=self.global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(
                    tf.add_n([tf.cast(x, tf.float32) for x in model.losses])
                )
            scaled = opt.scale_loss(loss)  # identity unless a LossScaleOptimizer (float16)
        variables = model.trainable_variables
        grads = tape.gradient(scaled, variables)
        opt.apply_gradients(zip(grads, variables, strict=True))
        mvals = {}
        for k, fn in self.metric_fns.items():
            values = per_example(tf.cast(fn(labels, preds), tf.float32))
            mvals[k] = tf.nn.compute_average_loss(values, global_batch_size=self.global_batch)
        if self.print_names:
            self._print(loss, labels, taps)
        return loss, mvals

    def _print(self, loss: Any, labels: Any, taps: dict[str, Any]) -> None:
        import tensorflow as tf

        step = self.step_var.read_value() + 1  # this step's number (1-based)

        def show() -> Any:
            values = {"loss": loss, "labels": labels, **taps}
            for name in self.print_names:
                tf.print("step", step, name, values[name], summarize=6, output_stream=sys.stderr)
            return tf.constant(True)

        tf.cond(step <= self.print_steps, show, lambda: tf.constant(False))


def _to_float32(t: Any) -> Any:
    import tensorflow as tf

    return tf.cast(t, tf.float32) if t.dtype.is_floating else t


def _rank_safe(fn: Callable) -> Callable:
    """fn(y_true, y_pred) that accepts [B] labels for [B, 1] predictions (as compile does)."""

    def call(y_true: Any, y_pred: Any) -> Any:
        return fn(_match_rank(y_true, y_pred), y_pred)

    return call


def _match_rank(labels: Any, preds: Any) -> Any:
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
