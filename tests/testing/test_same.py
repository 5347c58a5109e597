"""tfperf.testing.assert_same_examples: the multiset check of the doctor's --fix, with a
message that says how many examples differ and shows them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.errors import UserError
from tfperf.testing import assert_same_examples

from helpers import testingkit as kit


def test_per_example_and_batch_then_parse_pipelines_match(tmp_path):
    path = kit.write_examples(tmp_path / "a.tfrecord", kit.rows(23))
    assert_same_examples(kit.per_example(path), kit.batch_then_parse(path))


def test_one_changed_example_is_counted_and_shown(tmp_path):
    changed = kit.rows(10)
    changed[3] = ([3.0, 0.75], b"dog3")
    a = kit.write_examples(tmp_path / "a.tfrecord", kit.rows(10))
    b = kit.write_examples(tmp_path / "b.tfrecord", changed)
    with pytest.raises(AssertionError) as err:
        assert_same_examples(kit.per_example(a), kit.batch_then_parse(b))
    msg = str(err.value)
    assert "1 of ds_a's 10 examples are not in ds_b" in msg
    assert "1 of ds_b's 10 examples are not in ds_a" in msg
    assert "Only in ds_a (1 of 1 shown):\n  {label: b'cat3', x: float32[2] [3.0, 0.75]}" in msg
    assert "Only in ds_b (1 of 1 shown):\n  {label: b'dog3', x: float32[2] [3.0, 0.75]}" in msg


def test_a_missing_example_and_a_duplicate_are_counted(tmp_path):
    ds = tf.data.Dataset.range(10).map(lambda i: {"id": i})
    with pytest.raises(AssertionError, match=r"1 of ds_a's 10 examples are not in ds_b, 0 of"):
        assert_same_examples(ds, ds.take(9).batch(4))
    twice = ds.take(9).concatenate(ds.skip(8).take(1))  # 0..8, 8: 9 missing, 8 twice
    with pytest.raises(AssertionError) as err:
        assert_same_examples(ds, twice)
    assert "{id: 8}" in str(err.value) and "{id: 9}" in str(err.value)


def test_batched_and_unbatched_twins_match_from_their_specs():
    ds = tf.data.Dataset.range(7).map(lambda i: {"v": tf.stack([i, i + 1])})
    assert_same_examples(ds, ds.shuffle(7, seed=3).batch(3))
    # Both unbatched: batched=False compares whole elements, not their rows.
    one = tf.data.Dataset.from_tensors([1, 2, 3])
    other = tf.data.Dataset.from_tensors([3, 2, 1])
    with pytest.raises(AssertionError, match=r"element: int32\[3\] \[1, 2, 3\]"):
        assert_same_examples(one, other, batched=False)


def test_random_values_and_one_shot_iterators_still_show_what_differs():
    ds = tf.data.Dataset.range(6).map(lambda i: {"id": i})
    calls = itertools.count(1)  # new values in every pass, whatever the random seeds

    def noise() -> np.int64:
        return np.int64(1000 * next(calls))

    noisy = ds.map(lambda e: {"id": e["id"] + tf.numpy_function(noise, [], tf.int64)})
    with pytest.raises(AssertionError) as err:
        assert_same_examples(ds, noisy)
    msg = str(err.value)
    # A dataset is rendered in a second pass, where its random examples are new ones.
    assert "Only in ds_a (3 of 6 shown):\n  {id: 0}\n  {id: 1}\n  {id: 2}" in msg
    assert "Only in ds_b (3 of 6 shown):\n  <not yielded again by a second pass" in msg
    # An iterator is read once: its examples are rendered as they come.
    with pytest.raises(AssertionError) as err:
        assert_same_examples(iter(ds), iter(ds.skip(1)))
    assert "Only in ds_a (1 of 1 shown):\n  {id: 0}" in str(err.value)


def test_a_dataset_that_repeats_forever_needs_a_limit():
    ds = tf.data.Dataset.range(5).repeat()
    with pytest.raises(UserError, match="ds_b repeats forever.*limit=N"):
        assert_same_examples(tf.data.Dataset.range(5), ds)
    assert_same_examples(ds, ds.batch(5), limit=50)


def test_it_is_the_doctors_check():
    from tfperf.doctor.rewrites import edits as rewrites
    from tfperf.measure import examples

    assert rewrites.same_examples is examples.same_examples
    assert tfperf.testing.assert_same_examples is assert_same_examples


def _padded_pair() -> tuple[tf.data.Dataset, tf.data.Dataset]:
    """The same 1,800 variable-length examples in padded batches of different make-up, as
    the issue's user had them ("96 of 1800 examples are not in ds_b")."""
    tags = tf.ragged.constant([[i % 9 + 1] * (1 + i % 6) for i in range(1800)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices({"tags": tags, "id": tf.range(1800)})
    ds = ds.map(lambda e: {"tags": e["tags"], "id": e["id"]})  # dense rows, variable length
    order = ds.shuffle(1800, seed=4, reshuffle_each_iteration=False)
    return ds.padded_batch(32), order.padded_batch(24)


def test_padded_batches_that_differ_only_in_their_padding_pass_with_a_note():
    a, b = _padded_pair()
    diff = assert_same_examples(a, b)
    assert diff.stripped and diff.padding_only > 0
    assert "in their padding alone" in diff.note


def test_padding_exact_fails_saying_that_only_the_padding_differs():
    a, b = _padded_pair()
    with pytest.raises(AssertionError) as err:
        assert_same_examples(a, b, padding="exact")
    msg = str(err.value)
    assert msg.startswith("ds_a and ds_b yield the same examples except for their padding:")
    assert "padding='strip'" in msg and "not in ds_b" not in msg
    with pytest.raises(UserError, match="padding='none'"):
        assert_same_examples(a, b, padding="none")  # type: ignore[arg-type]


def test_a_real_change_under_the_padding_is_still_shown_without_it():
    a, _ = _padded_pair()
    changed = a.map(lambda e: {"tags": e["tags"] * 2, "id": e["id"]})
    with pytest.raises(AssertionError) as err:
        assert_same_examples(a, changed)
    msg = str(err.value)
    assert "1800 of ds_a's 1800 examples are not in ds_b" in msg
    assert "batches split into rows, without trailing padding" in msg
    assert "{id: 0, tags: int64[1] [1]}" in msg  # the example without its padding


def test_ragged_and_sparse_pipelines_match_their_unbatched_twins():
    tags = tf.ragged.constant([[i % 5 + 1] * (1 + i % 4) for i in range(50)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((tags, tf.range(50)))
    assert assert_same_examples(ds, ds.shuffle(50, seed=2).ragged_batch(8)).note == ""
    sparse = ds.map(lambda t, i: (tf.sparse.from_dense(t), i))
    assert_same_examples(sparse.batch(7), ds.ragged_batch(5))  # a varlen feature, as sparse
    # A sparse feature against its dense form: equal but for the dense one's trailing zeros.
    gaps = tf.data.Dataset.range(9).map(lambda i: tf.sparse.SparseTensor([[1]], [i + 1], [4]))
    diff = assert_same_examples(gaps.batch(2), gaps.map(tf.sparse.to_dense))
    assert diff.padding_only == 9 and "a sparse feature ends" in diff.note
    with pytest.raises(AssertionError, match="50 of ds_a's 50 examples are not in ds_b"):
        assert_same_examples(ds, ds.map(lambda t, i: (t[:-1], i)).ragged_batch(8))
