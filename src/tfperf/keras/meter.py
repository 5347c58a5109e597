"""The dataset side of the `model.fit` input monitor: `monitor(ds)` returns the same
examples with the consumer's wait for each batch measured inside tf.data.

How: `zip(clock, ds).map(record)` as the last stage. A sequential map runs on the thread
that asks for the next batch, and zip asks its inputs in order, so the clock's timestamp
is taken when `fit` asks and `record`'s when the batch arrives: their difference is the
dequeue wait alone, as tfperf's own loop measures it. Three sums (wait seconds, batches,
examples) go into one CPU variable that the callback reads every logged step; nothing
else changes the pipeline.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

# The meters made most recently: InputMonitor finds the one `fit` reads among them.
_RECENT: collections.deque[InputMeter] = collections.deque(maxlen=16)
_LOCK = threading.Lock()


@dataclass(frozen=True)
class MeterReading:
    """Sums since the meter was made: seconds waited, batches and examples delivered."""

    wait_s: float = 0.0
    batches: float = 0.0
    examples: float = 0.0

    def __sub__(self, other: MeterReading) -> MeterReading:
        return MeterReading(
            self.wait_s - other.wait_s,
            self.batches - other.batches,
            self.examples - other.examples,
        )


class InputMeter:
    """The variable a monitored dataset adds to; read from Python between calls."""

    def __init__(self) -> None:
        import tensorflow as tf

        # Outside any strategy scope and on the host: the pipeline runs there.
        with tf.init_scope(), tf.device("/cpu:0"):
            self.sums = tf.Variable(
                tf.zeros([3], tf.float64),
                trainable=False,
                name="tfperf_input_meter",
                synchronization=tf.VariableSynchronization.NONE,
                aggregation=tf.VariableAggregation.NONE,
            )

    def read(self) -> MeterReading:
        wait_s, batches, examples = (float(v) for v in self.sums.numpy())
        return MeterReading(wait_s, batches, examples)


def batch_rows(element: Any) -> tf.Tensor:
    """The leading dimension of an element's first component (1 for an unbatched scalar)."""
    import tensorflow as tf

    leaf = tf.nest.flatten(element)[0]
    if isinstance(leaf, tf.RaggedTensor):
        return tf.cast(leaf.nrows(), tf.float64)
    if isinstance(leaf, tf.SparseTensor):
        return tf.cast(leaf.dense_shape[0], tf.float64)
    leaf = tf.convert_to_tensor(leaf)
    if leaf.shape.rank == 0:
        return tf.constant(1.0, tf.float64)
    return tf.cast(tf.shape(leaf)[0], tf.float64)


def ends_with_prefetch(ds: tf.data.Dataset) -> bool:
    """Whether the pipeline's last stage (through with_options wrappers) is a prefetch."""
    while type(ds).__name__ == "_OptionsDataset":  # with_options adds a no-op stage
        ds = ds._input_dataset
    return type(ds).__name__ == "_PrefetchDataset"


def inline_map(ds: tf.data.Dataset, fn: Any) -> tf.data.Dataset:
    """A sequential map whose function runs inline on the calling thread: ~12 us per batch
    for the monitor's two maps, against ~85 us when each call is scheduled on the inter-op
    pool (measured on this 2-core host). TensorFlow keeps the switch private; a TensorFlow
    without it gets the public map."""
    try:
        from tensorflow.python.data.ops import map_op

        return map_op._MapDataset(ds, fn, use_inter_op_parallelism=False)
    except (ImportError, AttributeError, TypeError):
        return ds.map(fn)


def monitor(ds: tf.data.Dataset, meter: InputMeter | None = None) -> tf.data.Dataset:
    """`ds` with its input wait measured for `tfperf.keras.InputMonitor`: pass the result to
    `model.fit` in place of `ds` (the same elements, in the same order)."""
    import tensorflow as tf

    if not isinstance(ds, tf.data.Dataset):
        raise TypeError(
            f"tfperf.keras.monitor: expected a tf.data.Dataset, got {type(ds).__name__}; "
            "numpy arrays and generators have no pipeline to watch (wrap them with "
            "tf.data.Dataset.from_tensor_slices(...).batch(n) first)"
        )
    meter = meter or InputMeter()
    if not ends_with_prefetch(ds):
        # tf.data would inject this prefetch itself (inject_prefetch); it is made explicit
        # because the record map below turns that injection off.
        ds = ds.prefetch(tf.data.AUTOTUNE)
    clock = tf.data.Dataset.from_tensors(tf.constant(0.0, tf.float64)).repeat()
    clock = inline_map(clock, lambda _: tf.timestamp())
    sums = meter.sums

    def record(asked: tf.Tensor, element: Any) -> Any:
        arrived = tf.timestamp()
        sums.assign_add(
            tf.stack([arrived - asked, tf.constant(1.0, tf.float64), batch_rows(element)])
        )
        return element  # the assign is a stateful op: tf.data runs it without a data edge

    out = inline_map(tf.data.Dataset.zip((clock, ds)), record)
    opts = tf.data.Options()
    # A prefetch injected after `record` would move it to a background thread, timing the
    # pipeline's producer instead of fit's wait.
    opts.experimental_optimization.inject_prefetch = False
    out = out.with_options(opts)
    with _LOCK:
        _RECENT.append(meter)
    return out


def recent_meters() -> list[InputMeter]:
    with _LOCK:
        return list(_RECENT)
