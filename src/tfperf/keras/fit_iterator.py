"""The tf.data iterator a `model.fit` on another Keras backend (JAX, PyTorch) reads from:
there `fit` iterates the dataset in Python and hands the train function numpy batches, so
the callback never sees the iterator whose tf.data model (`get_model_proto`) tells the
stage costs. It is reached from fit's own frame: its epoch iterator's current generator
holds the tf.data iterator in its frame (~0.1 ms; a scan of every live object to find it
took ~100 ms on this host).
"""

from __future__ import annotations

import gc
from types import FrameType
from typing import Any

# Generators between fit's epoch iterator and the tf.data iterator (a look-ahead one on
# accelerators, the data adapter's): a few levels at most.
DEPTH = 5


def fit_iterator(frame: FrameType | None) -> Any:
    """The tf.data iterator of the `fit` whose frame is `frame` or one of its callers; None
    when there is none (a generator or arrays, not a tf.data.Dataset)."""
    from tensorflow.python.data.ops import iterator_ops

    epoch = _epoch_iterator(frame)
    if epoch is None:
        return None
    todo: list[Any] = [getattr(epoch, "_current_iterator", None)]
    seen: set[int] = set()
    for _ in range(DEPTH):
        found, nxt = None, []
        for obj in todo:
            for ref in gc.get_referents(obj):
                if type(ref) is iterator_ops.OwnedIterator:
                    found = ref
                elif id(ref) not in seen and (hasattr(ref, "gi_frame") or type(ref) is FrameType):
                    seen.add(id(ref))
                    nxt.append(ref)
        if found is not None:
            return found
        todo = nxt
    return None


def _epoch_iterator(frame: FrameType | None) -> Any:
    """fit's epoch iterator (Keras' EpochIterator: a data adapter and the current
    generator), found among the locals of `frame` and its callers."""
    while frame is not None:
        for value in frame.f_locals.values():
            if hasattr(value, "_current_iterator") and hasattr(value, "data_adapter"):
                return value
        frame = frame.f_back
    return None
