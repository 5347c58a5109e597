"""`assert_pipeline_faster`: pipeline B beats pipeline A beyond the noise, timed the one way
tfperf times (tfperf.measure: fresh warmed-up iterators, repeats interleaved A B A B, paired
ratios judged by `compare`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tfperf.errors import UserError
from tfperf.measure import DEFAULT_MIN_GAIN, Comparison, compare, pipeline_probe, side_by_side
from tfperf.util.format import number

if TYPE_CHECKING:
    import tensorflow as tf


def assert_pipeline_faster(
    a: tf.data.Dataset,
    b: tf.data.Dataset,
    *,
    batches: int = 20,
    warmup: int = 5,
    repeats: int = 5,
    min_gain: float = DEFAULT_MIN_GAIN,
    min_seconds: float = 0.25,  # per repeat: long enough that a scheduler hiccup is small
) -> Comparison:
    """Asserts that dataset `b` yields examples faster than dataset `a`: both are timed in
    `repeats` interleaved repeats (a b a b ...; each pulls `warmup` untimed then at least
    `batches` timed elements, and runs for at least `min_seconds`; a finite dataset is
    repeated), and b is faster only when every paired ratio of examples/s (b / a) is above 1
    and their median is at least 1 + `min_gain`. Elements are counted as batches (the first
    tensor's first dimension is the number of examples), so both must yield the same kind of
    element. Returns the comparison (`.ratio`, `.ratios`) when b is faster.

    Example:

        def test_parallel_map_is_faster():
            slow = ds.map(heavy).batch(32)
            fast = ds.map(heavy, num_parallel_calls=tf.data.AUTOTUNE).batch(32)
            tfperf.testing.assert_pipeline_faster(slow, fast)
    """
    _check_same_kind(a, b)
    probes = [
        pipeline_probe(name, ds, batches=batches, warmup=warmup, min_seconds=min_seconds)
        for name, ds in (("a", a), ("b", b))
    ]
    m = side_by_side(probes, repeats=repeats)
    c = compare(m["a"], m["b"], min_gain=min_gain)
    if c.faster:
        return c
    ratios = ", ".join(f"{r:.2f}" for r in c.ratios)
    raise AssertionError(
        f"b is not faster than a beyond the noise (verdict: {c.verdict}). Paired ratios of "
        f"examples/s, b / a, one per repeat: {ratios}; median {c.ratio:.2f}. Faster needs "
        f"every ratio above 1 and the median at least {1 + min_gain:.2f}. "
        f"a: {number(m['a'].examples_per_s.median)} examples/s, "
        f"b: {number(m['b'].examples_per_s.median)} examples/s (medians of {len(c.ratios)} "
        f"repeats of {batches} elements)."
    )


def _check_same_kind(a: Any, b: Any) -> None:
    import tensorflow as tf

    ranks = []
    for ds in (a, b):
        if not isinstance(ds, tf.data.Dataset):
            raise UserError(
                f"assert_pipeline_faster: expected two tf.data.Dataset, found {type(ds).__name__}."
            )
        first = tf.nest.flatten(ds.element_spec)[0]
        ranks.append(getattr(first, "shape", tf.TensorShape(None)).rank)
    if None not in ranks and ranks[0] != ranks[1]:
        raise UserError(
            "assert_pipeline_faster: a and b yield different kinds of element (their first "
            f"tensors have rank {ranks[0]} and {ranks[1]}): examples are counted by the first "
            "dimension of a batch, so batch both the same way."
        )
