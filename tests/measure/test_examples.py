"""tfperf.measure.examples: the one multiset-of-examples check (the doctor's --fix and
tfperf.testing both use it): strings, ragged and sparse features, float noise, batching,
padding."""

from __future__ import annotations

import time

import numpy as np
import pytest
import tensorflow as tf

from tfperf.measure.examples import (
    ExamplesOutOfTime,
    batched_pair,
    compare_examples,
    example_multiset,
    same_examples,
    strip_padding,
)


def _strings() -> tf.data.Dataset:
    words = [f"w{i}".encode() * (i + 1) for i in range(12)]
    return tf.data.Dataset.from_tensor_slices({"word": words, "id": list(range(12))})


def test_string_features_are_compared_by_value_not_by_object():
    ds = _strings()
    assert same_examples(ds.batch(5), ds.shuffle(12, seed=2).batch(3))
    assert not same_examples(ds, ds.map(lambda e: {"word": e["word"] + b"!", "id": e["id"]}))


def test_ragged_and_sparse_rows_are_split_per_example():
    ds = tf.data.Dataset.range(1, 9).map(lambda n: {"toks": tf.range(1, n + 1)})
    ragged = ds.ragged_batch(3)
    sparse = ds.map(lambda e: {"toks": tf.sparse.from_dense(e["toks"])}).batch(4)
    assert same_examples(ragged, ds.ragged_batch(5))
    assert same_examples(ragged, sparse)  # a varlen feature parsed to sparse, or ragged
    assert sum(example_multiset(sparse).values()) == 8
    assert not same_examples(ragged, ds.take(7).ragged_batch(3))


def test_float_noise_below_five_decimals_is_ignored_and_real_changes_are_not():
    ds = tf.data.Dataset.range(20).map(lambda i: tf.cast(i, tf.float32) / 3)
    assert same_examples(ds.batch(4), ds.map(lambda x: x + 1e-7).batch(6))
    diff = compare_examples(ds.batch(4), ds.map(lambda x: x + 1e-3).batch(6))
    assert (diff.missing_a, diff.missing_b, diff.total_a) == (20, 20, 20)
    assert len(diff.only_a) == 3


def test_batched_twin_is_recognised_from_the_element_specs():
    vec = tf.data.Dataset.range(6).map(lambda i: tf.stack([i, 2 * i]))
    assert batched_pair(vec, vec.batch(4)) == (False, True)
    assert batched_pair(vec.batch(2), vec) == (True, False)
    assert batched_pair(vec, vec) == (None, None)
    assert same_examples(vec, vec.batch(4))


def test_limit_stops_each_pass():
    ds = tf.data.Dataset.range(10).repeat()
    diff = compare_examples(ds, ds.batch(10), limit=30)
    assert diff.same and diff.limited and diff.total_a == 30


def test_a_pass_past_its_deadline_is_cut_and_says_how_far_it_got():
    def nap(i: tf.Tensor) -> tf.Tensor:
        return tf.numpy_function(lambda v: (time.sleep(0.05), v)[1], [i], tf.int64)

    slow = tf.data.Dataset.range(100).map(nap)  # 5 s for one pass
    start = time.monotonic()
    with pytest.raises(ExamplesOutOfTime) as cut:
        same_examples(slow, slow, deadline=start + 0.5)
    assert time.monotonic() - start < 3.0
    assert 0 < cut.value.examples < 100 and "after" in str(cut.value)
    assert same_examples(slow.take(5), slow.take(5), deadline=time.monotonic() + 60)


def _tags(n: int = 40) -> tf.data.Dataset:
    """Variable-length tags (1 to 5, never ending in 0) from a ragged source, and an id."""
    tags = tf.ragged.constant([[i % 7 + 1] * (1 + i % 5) for i in range(n)], dtype=tf.int64)
    return tf.data.Dataset.from_tensor_slices((tags, tf.range(n)))


def test_ragged_rows_match_the_dense_rows_of_the_same_values():
    """A ragged row was keyed by its Python list, a dense one by its bytes: a source of
    ragged tags never matched its own ragged_batch (rows of the source are dense)."""
    ds = _tags()
    assert same_examples(ds, ds.ragged_batch(6))
    assert same_examples(ds.ragged_batch(4), ds.shuffle(40, seed=1).ragged_batch(7))
    assert not same_examples(ds, ds.map(lambda t, i: (t * 2, i)).ragged_batch(6))
    boxes = tf.ragged.constant([[[0.1 * j, 0.2, 0.3, 0.4]] * (1 + j % 3) for j in range(20)])
    deep = tf.data.Dataset.from_tensor_slices(boxes)  # [boxes, coords]: ragged rank 2
    assert same_examples(deep, deep.ragged_batch(3))
    assert not same_examples(deep, deep.map(lambda b: b + 1.0).ragged_batch(3))


def test_sparse_rows_are_their_values_up_to_their_last_stored_entry():
    gaps = tf.data.Dataset.range(12).map(
        lambda i: tf.sparse.SparseTensor([[0], [2]], [i + 1, i + 2], [5])
    )
    assert same_examples(gaps, gaps.batch(5))
    dense = gaps.map(tf.sparse.to_dense).batch(5)
    diff = compare_examples(gaps, dense)
    assert diff.missing_a == 12  # a dense row keeps its trailing zeros
    assert diff.only_a[0][0].startswith("{element: int64[3]")
    # Without trailing zeros on both sides, where one is sparse and the other dense.
    diff = compare_examples(gaps, dense, padding=True)
    assert diff.same and diff.stripped and diff.padding_only == 12
    assert not compare_examples(gaps, dense.map(lambda d: d + 1), padding=True).same


def test_padded_batches_compare_without_their_trailing_padding_when_asked():
    ds = _tags(60).map(lambda t, i: (t, i))  # dense rows of varying length
    a = ds.padded_batch(8)
    b = ds.shuffle(60, seed=1, reshuffle_each_iteration=False).padded_batch(6)
    exact = compare_examples(a, b)
    assert exact.missing_a > 0 and not exact.stripped
    diff = compare_examples(a, b, padding=True)
    assert diff.same and diff.stripped and 0 < diff.padding_only == exact.missing_a
    assert "differ from ds_b's in their padding alone" in diff.note
    assert compare_examples(ds, a, padding=True).same  # unpadded against padded
    assert compare_examples(ds.ragged_batch(5), a, padding=True).same
    minus = ds.padded_batch(8, padding_values=(tf.constant(-1, tf.int64), 0))
    assert compare_examples(a, minus, padding=True).same  # each side's own padding value
    changed = compare_examples(a, ds.map(lambda t, i: (t + 1, i)).padded_batch(8), padding=True)
    assert changed.missing_a == 60 and changed.padding_only == 0
    assert "int64[1] [1]" in changed.only_a[0][0]  # shown without its padding


def test_stripping_padding_keeps_inner_zeros_and_the_same_cut_for_any_length():
    row = np.array([[1, 0, 0], [0, 2, 0], [0, 0, 0]])
    assert strip_padding(row).tolist() == [[1, 0], [0, 2]]
    assert strip_padding(np.pad(row, ((0, 4), (0, 2)))).tolist() == [[1, 0], [0, 2]]
    assert strip_padding(np.array([0, 3, 0, 7, 9, 9]), pad=9).tolist() == [0, 3, 0, 7]
    assert strip_padding(np.array([b"a", b"", b"b", b""])).tolist() == [b"a", b"", b"b"]
    assert strip_padding(np.zeros([4], np.float32)).shape == (0,)
