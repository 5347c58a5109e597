"""Examples the trainer received from the tf.data service in each distributed_epoch epoch.
The service delivers at most once: a worker killed mid-epoch takes the rest of its shard
file with it, and nothing else tells the trainer. Counting happens on the client, in the
graph (tf.Variables), one epoch's job iteration at a time: an epoch's end is seen when its
iteration ends, before the local repeat starts the next one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

_SLOTS = 4096  # epochs remembered between two reads (a read comes after every train call)


class EpochCounter:
    """Counts the examples of each service epoch; `finished()` returns the counts of the
    epochs ended since its last call."""

    def __init__(self) -> None:
        import tensorflow as tf

        # On the CPU, outside any strategy scope: the input pipeline's own counters.
        with tf.init_scope(), tf.device("/cpu:0"):
            self.received = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.epochs = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.per_epoch = tf.Variable(tf.zeros([_SLOTS], tf.int64), trainable=False)
        self.read = 0  # epochs already returned by finished()

    def counted(self, ds: tf.data.Dataset, batched: bool) -> tf.data.Dataset | None:
        """`ds` (one epoch from the service) counting its examples, then noting the epoch's
        end; None when its elements are not plain tensors (no end marker can be built)."""
        import tensorflow as tf

        specs = tf.nest.flatten(ds.element_spec)
        if not all(isinstance(s, tf.TensorSpec) and s.shape.rank is not None for s in specs):
            return None

        def count(*element: Any) -> Any:
            first = tf.nest.flatten(element)[0]
            n = tf.shape(first, out_type=tf.int64)[0] if batched else tf.constant(1, tf.int64)
            with tf.control_dependencies([self.received.assign_add(n)]):
                out = tf.nest.map_structure(tf.identity, element)
            return out[0] if len(out) == 1 else out  # a dict element came as one argument

        def end_of_epoch(_: Any) -> Any:
            slot = tf.math.floormod(self.epochs, _SLOTS)
            done = self.per_epoch.scatter_nd_update([[slot]], [self.received.read_value()])
            with tf.control_dependencies([done]):
                ended = self.epochs.assign_add(1)
            with tf.control_dependencies([ended]):
                reset = self.received.assign(0)
            with tf.control_dependencies([reset]):  # an element of ds's structure, dropped
                return tf.nest.map_structure(_empty_like, ds.element_spec)

        marker = tf.data.Dataset.range(1).map(end_of_epoch).filter(lambda *_: False)
        return ds.map(count).concatenate(marker)

    def finished(self) -> list[int]:
        """Examples received in each epoch that ended since the last call, oldest first."""
        ended = int(self.epochs.numpy())
        counts = self.per_epoch.numpy()
        new = [int(counts[e % _SLOTS]) for e in range(max(self.read, ended - _SLOTS), ended)]
        self.read = ended
        return new


def _empty_like(spec: Any) -> Any:
    import tensorflow as tf

    shape = [0 if d is None else d for d in spec.shape.as_list()]
    if spec.dtype == tf.string:
        return tf.fill(shape, "")
    return tf.zeros(shape, spec.dtype)
