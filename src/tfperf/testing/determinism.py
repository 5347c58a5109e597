"""`assert_deterministic`: two passes of a pipeline give the same elements in the same order.
A function `fn(seed) -> Dataset` is built twice with the same seed; a Dataset is copied twice
from its graph (what the same code gives in a new process)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tfperf.errors import UserError
from tfperf.measure.examples import named_leaves, render_value, to_value

if TYPE_CHECKING:
    import tensorflow as tf

_END = object()
_CAUSES = (
    "Each of these changes the order or the values from one run to the next: shuffle() or "
    "a tf.random op without a seed, interleave/map with deterministic=False, "
    "tf.data.Options().deterministic = False, a Python function with its own randomness."
)


def assert_deterministic(
    ds_or_fn: tf.data.Dataset | Callable[[int], tf.data.Dataset],
    seed: int | None = None,
    *,
    elements: int = 1000,
) -> None:
    """Asserts that two passes yield the same elements in the same order (the first
    `elements` elements, or the whole pass when it is shorter).

    - `fn(seed) -> tf.data.Dataset`: called twice with `seed` (0 when not given), one pass of
      each. Use it for a pipeline that reshuffles every epoch: its seed fixes each epoch's
      order, and building it again must give the same first epoch.
    - a `tf.data.Dataset`: two fresh copies rebuilt from its graph, the first epoch of each,
      as the same code gives in a new process. Its seeds were fixed when it was built, so
      `seed` is not accepted with a Dataset.

    Example:

        def test_pipeline_is_reproducible():
            tfperf.testing.assert_deterministic(lambda seed: make_dataset(seed=seed), seed=42)
    """
    import tensorflow as tf

    if isinstance(ds_or_fn, tf.data.Dataset):
        if seed is not None:
            raise UserError(
                "assert_deterministic: a seed was given with a tf.data.Dataset, whose seeds "
                "were fixed when it was built. Pass a function seed -> Dataset to build it "
                "with that seed, or drop seed= to check the dataset as built."
            )
        first, second = _graph_copy(ds_or_fn), _graph_copy(ds_or_fn)
        what = "two copies of the dataset"
    elif callable(ds_or_fn):
        seed = 0 if seed is None else seed
        first, second = _build(ds_or_fn, seed), _build(ds_or_fn, seed)
        what = f"two datasets built by {_name(ds_or_fn)}({seed})"
    else:
        raise UserError(
            "assert_deterministic: expected a tf.data.Dataset or a function seed -> Dataset, "
            f"found {type(ds_or_fn).__name__}."
        )
    _compare_passes(first, second, what, elements)


def _compare_passes(first: Any, second: Any, what: str, elements: int) -> None:
    it_a, it_b = iter(first), iter(second)
    for i in range(elements):
        a, b = next(it_a, _END), next(it_b, _END)
        if a is _END and b is _END:
            return
        if a is _END or b is _END:
            ended, other = ("first", "second") if a is _END else ("second", "first")
            raise AssertionError(
                f"{what} differ in length: the {ended} pass ended after {i} elements, the "
                f"{other} yields more. {_CAUSES}"
            )
        found = _first_difference(a, b)
        if found is not None:
            feature, va, vb = found
            raise AssertionError(
                f"{what} differ at element {i} (counting from 0; the {i} before were equal), "
                f"feature {feature!r}: {va} in the first pass, {vb} in the second. {_CAUSES}"
            )


def _first_difference(a: Any, b: Any) -> tuple[str, str, str] | None:
    """(feature, value in a, value in b) of the first feature that differs, else None."""
    import numpy as np

    la, lb = named_leaves(a), named_leaves(b)
    if [n for n, _ in la] != [n for n, _ in lb]:
        return "(structure)", str([n for n, _ in la]), str([n for n, _ in lb])
    for (name, ta), (_, tb) in zip(la, lb, strict=True):
        va, vb = to_value(ta), to_value(tb)
        if isinstance(va, list) or isinstance(vb, list):
            equal = va == vb
        else:
            nan = va.dtype.kind in "fc" and vb.dtype.kind in "fc"
            equal = va.shape == vb.shape and bool(np.array_equal(va, vb, equal_nan=nan))
        if not equal:
            return name, render_value(va), render_value(vb)
    return None


# Ops whose random state lives in a seed-generator resource, which serialization drops
# (a copy would draw random seeds) -> (the op that keeps it in its seeds, that input's
# position): the same seeds give the same first epoch, as the same code in a new process.
_SEEDED = {
    "ShuffleDatasetV3": ("ShuffleDataset", 4),
    "ShuffleAndRepeatDatasetV2": ("ShuffleAndRepeatDataset", 5),
    "RandomDatasetV2": ("RandomDataset", 2),
}


def _graph_copy(ds: tf.data.Dataset) -> tf.data.Dataset:
    """A new dataset from `ds`'s serialized graph: fresh iterators, seeds as built."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    # py_function/from_generator serialize as references to this process's functions.
    policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    try:
        graph = graph_pb2.GraphDef()
        graph.ParseFromString(ds._as_serialized_graph(external_state_policy=policy).numpy())
        for node in [*graph.node, *(n for f in graph.library.function for n in f.node_def)]:
            if node.op in _SEEDED:
                node.op, position = _SEEDED[node.op]
                del node.input[position]
                node.attr.pop("rerandomize_each_iteration", None)
        variant = tf.raw_ops.DatasetFromGraph(graph_def=graph.SerializeToString())
    except (tf.errors.OpError, ValueError, TypeError) as e:
        raise UserError(
            "assert_deterministic: the dataset's graph could not be copied "
            f"({type(e).__name__}: {str(e).splitlines()[0]}). Pass a function seed -> Dataset "
            "that builds it instead."
        ) from None
    return tf.data.experimental.from_variant(variant, ds.element_spec)


def _build(fn: Callable[[int], Any], seed: int) -> Any:
    import tensorflow as tf

    ds = fn(seed)
    if not isinstance(ds, tf.data.Dataset):
        raise UserError(
            f"assert_deterministic: {_name(fn)}({seed}) returned {type(ds).__name__}; "
            "expected a tf.data.Dataset."
        )
    return ds


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__
