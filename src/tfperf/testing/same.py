"""`assert_same_examples`: two pipelines yield the same multiset of examples. It is the check
the doctor's --fix applies to each rewrite (tfperf.measure.examples), with a message."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from tfperf.errors import UserError
from tfperf.measure.examples import SHOW, ExampleDiff, compare_examples

if TYPE_CHECKING:
    import tensorflow as tf


def assert_same_examples(
    ds_a: tf.data.Dataset,
    ds_b: tf.data.Dataset,
    *,
    limit: int | None = None,
    batched: bool | None = None,
    show: int = SHOW,
    padding: Literal["strip", "exact"] = "strip",
) -> ExampleDiff:
    """Asserts that one pass of `ds_a` and one of `ds_b` yield the same examples, counted
    with repeats and in any order: batches are split into their rows, so a pipeline that
    batches, shuffles (with a seed or not) or reorders still matches its plain twin. Float
    values match to 5 decimals (batched and per-example kernels differ in the last bits).
    Ragged and sparse features are split into rows too: a ragged row matches the dense row
    of the same values, a sparse one its values up to its last stored entry.

    `limit` compares only the first examples of each (needed for a dataset that repeats
    forever); `batched` says whether elements are batches (None: inferred from the element
    specs, then per element: split when every tensor has the same first dimension).

    `padding`: with a `padded_batch` on either side, each batch is padded to its own
    longest example, so the same example comes out at different lengths. "strip" (the
    default) compares examples without their trailing padding (padded_batch's padding
    value, default 0): they pass when only the padding differs, and the returned diff's
    `note` says how many differed in it. A feature sparse on one side and dense on the
    other is compared the same way, without its trailing zeros. "exact" fails then, with a
    message saying that only the padding differs.

    Returns the comparison (`ExampleDiff`: totals, `note`) when it passes.

    Example:

        def test_fast_pipeline_keeps_the_examples():
            slow = tf.data.Dataset.range(100).map(parse).batch(8)
            fast = tf.data.Dataset.range(100).batch(8).map(parse_batch)
            tfperf.testing.assert_same_examples(slow, fast)
    """
    if limit is None:
        for name, ds in (("ds_a", ds_a), ("ds_b", ds_b)):
            _check_finite(name, ds)
    if padding not in ("strip", "exact"):
        raise UserError(f"assert_same_examples: padding={padding!r}; use 'strip' or 'exact'")
    diff = compare_examples(ds_a, ds_b, limit=limit, batched=batched, show=show, padding=True)
    if not diff.same:
        raise AssertionError(failure_message(diff))
    if padding == "exact" and diff.padding_only:
        raise AssertionError(padding_message(diff))
    return diff


def failure_message(diff: ExampleDiff) -> str:
    """How many examples differ, and a few of each side."""
    scope = " (the first examples only: limit reached)" if diff.limited else ""
    lines = [
        f"ds_a and ds_b do not yield the same examples{scope}: "
        f"{diff.missing_a} of ds_a's {diff.total_a} examples are not in ds_b, "
        f"{diff.missing_b} of ds_b's {diff.total_b} examples are not in ds_a "
        "(compared as multisets, batches split into rows"
        + (", without trailing padding" if diff.stripped else "")
        + ")."
    ]
    for side, rows, missing in (
        ("ds_a", diff.only_a, diff.missing_a),
        ("ds_b", diff.only_b, diff.missing_b),
    ):
        if not rows:
            continue
        lines.append(f"Only in {side} ({len(rows)} of {missing} shown):")
        lines += [f"  {text}" + (f"  x{count}" if count > 1 else "") for text, count in rows]
    return "\n".join(lines)


def padding_message(diff: ExampleDiff) -> str:
    """The examples are the same but for their padding (padding='exact')."""
    return (
        "ds_a and ds_b yield the same examples except for their padding: "
        f"{diff.padding_only:,} of ds_a's {diff.total_a:,} examples match one of ds_b's only "
        "once their trailing padding is stripped (padded_batch pads each batch to its own "
        "longest example, so the batches' make-up sets each example's length). Pass "
        "padding='strip' to compare examples without their padding."
    )


def _check_finite(name: str, ds: tf.data.Dataset) -> None:
    import tensorflow as tf

    if not isinstance(ds, tf.data.Dataset):
        return  # any iterable of elements: the caller knows it ends
    if int(ds.cardinality()) == tf.data.INFINITE_CARDINALITY:
        raise UserError(
            f"assert_same_examples: {name} repeats forever (its cardinality is infinite), so "
            "one pass never ends. Compare one epoch (the datasets before .repeat()) or pass "
            "limit=N to compare the first N examples of each."
        )
