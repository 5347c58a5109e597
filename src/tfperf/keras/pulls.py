"""The device's wait for input in a `fit` on the JAX backend. There a train call pulls its
batches in Python, then dispatches its step and returns before the step has run: a batch
pulled while the previous step still runs costs the device nothing. So each pull is timed
here, and asks the previous step's result whether it is ready (`is_ready`, no waiting)
before and after: ready before, the whole pull was idle; still running after, none of it;
ready in between, half of it is counted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any


def first_array(outputs: Any) -> Any:
    """A leaf of a call's outputs that can say whether it is computed (None: none can)."""
    import jax

    for leaf in jax.tree_util.tree_leaves(outputs):
        if hasattr(leaf, "is_ready"):
            return leaf
    return None


class TimedPulls:
    """`fit`'s batch iterator for one call, adding each pull's idle seconds to `idle`."""

    def __init__(self, inner: Iterator[Any], previous: Any):
        self._inner, self._previous = inner, previous
        self.idle = 0.0

    def __iter__(self) -> TimedPulls:
        return self

    def __next__(self) -> Any:
        previous = self._previous
        busy_before = previous is not None and not previous.is_ready()
        t0 = time.perf_counter()
        batch = next(self._inner)
        pulled = time.perf_counter() - t0
        busy_after = busy_before and not previous.is_ready()
        self.idle += 0.0 if busy_after else pulled / 2 if busy_before else pulled
        # Later pulls of the same call follow steps this call dispatched, out of sight here:
        # counted whole (the meter's wait bounds them).
        self._previous = None
        return batch
