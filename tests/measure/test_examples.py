"""tfperf.measure.examples: the one multiset-of-examples check (the doctor's --fix and
tfperf.testing both use it): strings, ragged and sparse features, float noise, batching."""

from __future__ import annotations

import time

import pytest
import tensorflow as tf

from tfperf.measure.examples import (
    ExamplesOutOfTime,
    batched_pair,
    compare_examples,
    example_multiset,
    same_examples,
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
