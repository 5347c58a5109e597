"""The compiled multi-step train function: one tf.function runs `n` steps in a tf.range
loop (as Orbit does), pulling each batch from the distributed iterator inside the graph,
and reports a retrace as an error naming the input that changed. The model, loss and
optimizer it trains come from train/model.py.

Input wait is measured in the graph: tf.timestamp() just before and just after
`next(iterator)`, summed over the loop. Pulling batches in Python would add a host round
trip per step (the very cost of feeding numpy batches through feed_dict) and stacking
windows breaks under distribution; in-graph timestamps cost two scalar ops per step and
time exactly the dequeue from the prefetch buffer, on every strategy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tfperf.errors import UserError
from tfperf.measure.probes import batch_rows
from tfperf.train.model import adapt_features
from tfperf.train.objectives import match_rank, to_float32
from tfperf.train.outputs import Objectives
from tfperf.train.xla import JitChoice, is_xla_refusal, xla_message

if TYPE_CHECKING:
    import keras


class RetraceError(UserError):
    """The train function was traced a second time: an input changed shape or dtype."""


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


def _rows_of(batch: Any) -> Any:
    """The examples in one replica's batch: its first component's rows, as float64."""
    import tensorflow as tf

    return tf.cast(batch_rows(tf.nest.flatten(batch)[0]), tf.float64)


class TrainStep:
    """Runs `num_steps` optimizer steps per call inside one tf.function.

    Call with (iterator, num_steps as an int32 tensor); returns a dict of tensors:
    loss (mean over the steps), wait_s (input wait summed), examples (the batches' rows),
    each per-example metric's mean and each stateful metric's result over the call's batches
    (reset at each call).

    `loss_fn` is the bound `Objectives` (several outputs, loss weights, stateful metrics:
    train/outputs.py), or one loss function with `metric_fns` for a single output.
    """

    def __init__(
        self,
        model: keras.Model,
        optimizer: keras.Optimizer,
        loss_fn: Objectives | Callable[..., Any],
        metric_fns: Mapping[str, Callable[..., Any]],
        strategy: Any,
        step_var: Any,
        *,
        print_tensors: Sequence[str] = (),
        print_steps: int = 3,
        jit: JitChoice | None = None,
    ):
        self.model, self.optimizer, self.strategy = model, optimizer, strategy
        self.objectives = (
            loss_fn
            if isinstance(loss_fn, Objectives)
            else Objectives.single(loss_fn, dict(metric_fns))
        )
        self.step_var = step_var
        self.print_names = [n for n in print_tensors if n]
        self.print_steps = print_steps
        self._probe = self._make_probe(model, self.print_names)
        self._retrace_error: RetraceError | None = None
        self.jit = jit or JitChoice(False, "train.jit_compile: false")
        self._build_function()

    def _build_function(self) -> None:
        import tensorflow as tf

        # Each replica's step under XLA (as Keras' compile(jit_compile=True) compiles fit's
        # step); the loop around it pulls batches from the iterator, which XLA cannot hold.
        # Not converted by AutoGraph, as Keras' own train step is not (model.fit trains the
        # same models): converting the model's, the loss' and the optimizer's Python took ~4 s
        # of every run's start-up, and the step has no tensor-dependent Python of its own.
        step = tf.autograph.experimental.do_not_convert(self._replica_step)
        self._replica_fn = tf.function(step, jit_compile=True) if self.jit.enabled else step
        # reduce_retracing=False: a changed input re-traces (and is reported) instead of
        # silently widening to a slower, shape-generic function.
        self.function = tf.function(self._loop, reduce_retracing=False)
        self.traces = 0
        self.signature: dict[str, str] | None = None

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
        except Exception as exc:
            # AutoGraph wraps errors raised while tracing; surface ours unwrapped.
            err, self._retrace_error = self._retrace_error, None
            if err is not None:
                raise err from None
            if self.jit.enabled and self.traces <= 1 and is_xla_refusal(exc):
                return self._without_xla(exc, args)
            raise

    def _without_xla(self, exc: Exception, args: tuple[Any, Any]) -> Any:
        """XLA refused the step on its first call: `auto` trains without it (saying why),
        an explicit `true` is the user's to change."""
        why = xla_message(exc)
        if not self.jit.reason.startswith("auto"):
            raise UserError(
                f"train.jit_compile: true, but XLA cannot compile this model's train step: "
                f"{why}; set train.jit_compile: auto (or false)"
            ) from None
        self.jit = JitChoice(False, f"auto: off: XLA refused the step ({why})")
        self._build_function()
        return self.function(*args)

    def concrete_function(self, iterator: Any) -> Any:
        import tensorflow as tf

        return self.function.get_concrete_function(iterator, tf.TensorSpec([], tf.int32))

    @staticmethod
    def _make_probe(model: keras.Model, names: Sequence[str]) -> keras.Model | None:
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
        sig = tf.autograph.experimental.do_not_convert(describe_signature)(iterator, num_steps)
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
        examples = tf.constant(0.0, tf.float64)  # a partial or variable batch counts its rows
        names = self.objectives.per_example_names
        # Stateful metrics (AUC, ...) cover this call's batches, as fit's cover its epoch.
        for _, metric in self.objectives.stateful:
            metric.reset_state()
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
            rows = strategy.run(_rows_of, args=(batch,))
            examples += strategy.reduce(tf.distribute.ReduceOp.SUM, rows, axis=None)
            loss, mvals = strategy.run(self._replica_fn, args=(batch,))
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
        out = {"loss": loss_sum / n, "wait_s": wait, "examples": examples}
        out.update({f"metrics/{k}": msums[i] / n for i, k in enumerate(names)})
        with tf.control_dependencies([loss_sum]):
            for k, metric in self.objectives.stateful:
                out[f"metrics/{k}"] = tf.cast(metric.result(), tf.float32)
        return out

    @property
    def metric_names(self) -> list[str]:
        """The names of every metric a call returns (under metrics/)."""
        return self.objectives.names

    def _replica_step(self, batch: Any) -> tuple[Any, dict[str, Any]]:
        import tensorflow as tf

        features, labels = batch[0], batch[1]
        sample_weight = batch[2] if len(batch) == 3 else None  # (x, y, sw) batches
        features = adapt_features(self.model, features)
        model, opt = self.model, self.optimizer
        with tf.GradientTape() as tape:
            if self._probe is not None:
                probe, n_out, names = self._probe
                outs = probe(features, training=True)
                preds = outs[0] if n_out == 1 else list(outs[:n_out])
                if n_out > 1 and all(isinstance(h.pred_key, str) for h in self.objectives.heads):
                    # A dict of outputs: the probe returns them as a list, in output_names' order.
                    preds = dict(zip(model.output_names, preds, strict=True))
                taps = dict(zip(names, outs[n_out:], strict=True))
            else:
                preds, taps = model(features, training=True), {}
            # The loss is computed in float32 whatever the compute policy (model outputs float32).
            preds = tf.nest.map_structure(to_float32, preds)
            labels = match_rank(labels, preds)
            losses, each = self.objectives.losses(labels, preds, sample_weight)
            # The mean over the batch as it really is (its rows x replicas), as Keras does: a
            # user's pipeline may batch other than pipeline.batch_size, or end short.
            loss = tf.nn.compute_average_loss(losses)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(
                    tf.add_n([tf.cast(x, tf.float32) for x in model.losses])
                )
            scaled = opt.scale_loss(loss)  # identity unless a LossScaleOptimizer (float16)
        variables = model.trainable_variables
        grads = tape.gradient(scaled, variables)
        opt.apply_gradients(zip(grads, variables, strict=True))
        values = {**each, **self.objectives.metric_values(labels, preds)}
        mvals = {k: tf.nn.compute_average_loss(v) for k, v in values.items()}
        self.objectives.update_stateful(labels, preds)
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
