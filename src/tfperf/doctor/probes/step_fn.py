"""Any training step as the doctor's consumer: a Python callable that takes one batch and
does one training step (a `jax.jit`-compiled Flax/JAX step, a PyTorch step, a Keras 3 model
on the JAX backend through its own compiled train step), fed as the user's loop feeds it.

A batch is pulled from the tf.data iterator in Python and turned into numpy
(`as_numpy_iterator`'s form), then into the framework's arrays by `convert` when one is
given (e.g. `jax.device_put`: the host-to-device copy counts as input, as in the user's
loop); the time spent there is the step's input wait. Each step's result is waited for
(`block_until_ready`) before the next batch is asked for, so that an asynchronous
framework's step is timed whole. The compute limit feeds one converted batch again and
again: no pipeline, no conversion.

It builds step runners and times nothing; target.py's probes run them.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfperf.errors import UserError
from tfperf.measure import StepRunner
from tfperf.measure.ready import block

if TYPE_CHECKING:
    import keras


def to_numpy(element: Any) -> Any:
    """A tf.data element as `as_numpy_iterator` yields it: numpy arrays in the same
    structure (ragged and sparse tensors as their tf value types)."""
    import tensorflow as tf

    def one(x: Any) -> Any:
        if isinstance(x, tf.RaggedTensor | tf.SparseTensor):
            return x.numpy() if isinstance(x, tf.RaggedTensor) else tf.sparse.to_dense(x).numpy()
        return x.numpy() if hasattr(x, "numpy") else x

    return tf.nest.map_structure(one, element)


@dataclass
class StepFn:
    """A user's training step as the doctor's consumer (see the module docstring)."""

    fn: Callable[[Any], Any]
    name: str = "step"
    convert: Callable[[Any], Any] | None = None
    # Compute what-ifs this step can be timed as (e.g. "xla": the same model compiled with
    # XLA), each made on demand.
    variants: dict[str, Callable[[], StepFn]] = field(default_factory=dict)
    # The batch the compute limit feeds, per iterator: a weak key, so that a probe's `del it`
    # still stops that iterator.
    _cached: weakref.WeakKeyDictionary[Any, Any] = field(
        default_factory=weakref.WeakKeyDictionary, repr=False
    )

    def fetch(self, it: Any) -> Any:
        """The next batch of `it`, as the step takes it."""
        batch = to_numpy(next(it))
        return self.convert(batch) if self.convert is not None else batch

    def call(self, batch: Any) -> None:
        try:
            result = self.fn(batch)
        except UserError:
            raise
        except Exception as exc:
            raise StepError(self.name, exc) from exc
        block(result)

    @property
    def run_fed(self) -> StepRunner:
        """`n` steps, each on the next batch of the pipeline; the seconds spent getting them."""

        def run(it: Any, n: int) -> float:
            wait = 0.0
            for _ in range(n):
                t0 = time.perf_counter()
                batch = self.fetch(it)
                wait += time.perf_counter() - t0
                self.call(batch)
            return wait

        return run

    @property
    def run_cached(self) -> StepRunner:
        """`n` steps on one batch held in memory (the first of `it`): the compute limit."""

        def run(it: Any, n: int) -> float:
            try:
                batch = self._cached[it]
            except (KeyError, TypeError):
                batch = self.fetch(it)
                try:
                    self._cached[it] = batch
                except TypeError:  # not weakly referable: fetched afresh per call
                    pass
            for _ in range(n):
                self.call(batch)
            return 0.0

        return run


class StepError(UserError):
    """The user's step raised: its message names the step and what it was fed (a user's
    step, so a user's error: one paragraph, no traceback of tfperf's)."""

    def __init__(self, name: str, exc: Exception):
        super().__init__(
            f"the training step {name!r} raised {type(exc).__name__}: {str(exc)[:300]} "
            "(it is called with one batch as `as_numpy_iterator` yields it, passed through "
            "`convert` when one is given)"
        )


def step_name(fn: Callable[..., Any]) -> str:
    """A readable name of a step: its function's qualified name."""
    inner = getattr(fn, "__wrapped__", fn)  # jax.jit keeps the jitted function here
    return str(getattr(inner, "__qualname__", None) or type(fn).__name__)


def check_step(fn: Any, convert: Any) -> None:
    """A UserError unless `fn` (and `convert`, when given) are callables."""
    if not callable(fn):
        raise UserError(
            f"tfperf: step: expected a callable that takes one batch and does one training "
            f"step, found {type(fn).__name__}"
        )
    if convert is not None and not callable(convert):
        raise UserError(
            f"tfperf: convert: expected a callable that turns a numpy batch into the step's "
            f"arrays (e.g. jax.device_put), found {type(convert).__name__}"
        )


# ---- a Keras 3 model on a backend other than TensorFlow --------------------------------
def backend() -> str:
    """Keras' backend in this process (fixed when keras is first imported)."""
    import keras

    return str(keras.backend.backend())


def keras_step(model: keras.Model, loss: Any = None, jit_compile: bool | None = None) -> StepFn:
    """A copy of `model` (same layers, fresh weights, a fresh optimizer of the same kind,
    no metrics: the doctor needs none) trained by its backend's own compiled train step, as
    `fit` calls it; batches become the backend's arrays as `fit` makes them."""
    import keras

    clone = _compiled_clone(model, loss, jit_compile)
    state: list[Any] = []

    def to_arrays(batch: Any) -> Any:
        return keras.tree.map_structure(keras.ops.convert_to_tensor, batch)

    if backend() != "jax":
        # Other backends keep their state in the variables: their public step is enough.
        def step(batch: Any) -> Any:
            return clone.train_on_batch(*_xy(batch), return_dict=True)

        return StepFn(step, name=str(model.name), convert=to_arrays)

    def jax_step(batch: Any) -> Any:
        # fit's own loop (keras/src/backend/jax/trainer.py): the jitted train function on
        # a state tuple, variables synced back only at the end; train_on_batch syncs every
        # step (~2 ms more per step, measured on this host).
        if not state:
            clone._symbolic_build(data_batch=batch)
            clone.make_train_function()
            state.append(
                clone._get_jax_state(
                    trainable_variables=True,
                    non_trainable_variables=True,
                    optimizer_variables=True,
                    metrics_variables=True,
                )
            )
        logs, state[0] = clone.train_function(state[0], iter([batch]))
        return logs

    variants: dict[str, Callable[[], StepFn]] = {}
    if clone.jit_compile is False and jit_compile is None:
        # Compiled without XLA (jit_compile=False): the compiled step is a what-if to time.
        variants["xla"] = lambda: keras_step(model, loss, jit_compile=True)
    return StepFn(jax_step, name=str(model.name), convert=to_arrays, variants=variants)


def _xy(batch: Any) -> tuple[Any, ...]:
    return tuple(batch) if isinstance(batch, tuple) else (batch,)


def _compiled_clone(model: keras.Model, loss: Any, jit_compile: bool | None = None) -> keras.Model:
    """`model`'s copy compiled as the user compiled it (with `jit_compile` when given), less
    the metrics; the model itself when Keras cannot clone it (the caller restores its
    weights)."""
    import keras

    config = getattr(model, "_compile_config", None)
    compiled: dict[str, Any] = dict(config.config) if config is not None else {}
    if not compiled and loss is None:
        raise UserError(
            f"tfperf: the model {model.name!r} is not compiled: compile it with its optimizer "
            "and loss, or pass loss=..."
        )
    try:
        clone = keras.models.clone_model(model)
    except Exception:  # noqa: BLE001 - not clonable (subclassed without get_config): itself
        clone = model
    optimizer = compiled.get("optimizer") or "adam"
    if isinstance(optimizer, keras.optimizers.Optimizer):
        # An optimizer instance tracks one model's variables: the copy gets its own.
        optimizer = optimizer.__class__.from_config(optimizer.get_config())
    clone.compile(
        optimizer=optimizer,
        loss=loss if loss is not None else compiled.get("loss"),
        loss_weights=compiled.get("loss_weights"),
        # An empty list, not None: compile keeps the metrics a clone inherited for None.
        metrics=[],
        jit_compile=compiled.get("jit_compile", "auto") if jit_compile is None else jit_compile,
        steps_per_execution=compiled.get("steps_per_execution", 1),
    )
    return clone
