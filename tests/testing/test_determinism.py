"""tfperf.testing.assert_deterministic: a function seed -> Dataset built twice, or a Dataset
copied twice from its graph, yields the same elements in the same order; the message names
the element and the feature that differ."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from tensorflow.python.eager import context

from tfperf.errors import UserError
from tfperf.testing import assert_deterministic

from helpers import testingkit as kit


@pytest.fixture(autouse=True)
def no_global_seed():
    """An unseeded shuffle is random only while no global seed is set (another test may
    have set one)."""
    saved = context.global_seed()
    tf.random.set_seed(None)
    yield
    tf.random.set_seed(saved)


def _records(tmp_path: Path) -> Path:
    return kit.write_examples(tmp_path / "a.tfrecord", kit.rows(40))


def test_a_seeded_pipeline_function_is_deterministic(tmp_path):
    path = _records(tmp_path)
    assert_deterministic(lambda seed: kit.batch_then_parse(path, seed=seed), seed=7)


def test_an_unseeded_shuffle_fails_naming_the_element_and_feature(tmp_path):
    path = _records(tmp_path)
    with pytest.raises(AssertionError) as err:
        assert_deterministic(lambda seed: kit.batch_then_parse(path, seed=None), seed=7)
    msg = str(err.value)
    assert "two datasets built by" in msg and "(7) differ at element 0" in msg
    assert "feature 'label'" in msg and "in the first pass" in msg
    assert "shuffle() or a tf.random op without a seed" in msg


def test_a_dataset_is_checked_on_fresh_copies_of_its_graph(tmp_path):
    path = _records(tmp_path)
    # Reshuffles every epoch, but its seed fixes the first epoch of every copy.
    assert_deterministic(kit.batch_then_parse(path, seed=3))
    ds = tf.data.Dataset.range(50).shuffle(50).map(lambda i: {"id": i, "x": tf.cast(i, tf.float32)})
    with pytest.raises(
        AssertionError, match=r"two copies of the dataset differ at element \d+.*'id'"
    ):
        assert_deterministic(ds)


def test_an_unseeded_random_map_fails_at_its_feature():
    def augment(i):
        return {"id": i, "noise": tf.random.uniform([2])}

    with pytest.raises(AssertionError, match="feature 'noise': float32"):
        assert_deterministic(lambda seed: tf.data.Dataset.range(5).map(augment), seed=1)


def test_a_length_difference_is_reported():
    calls = []

    def grows(seed):
        calls.append(seed)
        return tf.data.Dataset.range(3 + len(calls))

    with pytest.raises(AssertionError, match="the first pass ended after 4 elements"):
        assert_deterministic(grows, seed=0)


def test_wrong_arguments_are_user_errors():
    with pytest.raises(UserError, match="a seed was given with a tf.data.Dataset"):
        assert_deterministic(tf.data.Dataset.range(3), seed=1)
    with pytest.raises(UserError, match=r"returned list; expected a tf.data.Dataset"):
        assert_deterministic(lambda seed: [1, 2], seed=1)


def _gapped_sparse() -> tf.data.Dataset:
    """Sparse rows with a gap (entries 0 and 2 of 5): RaggedTensor.from_sparse refuses them."""
    return tf.data.Dataset.range(40).map(
        lambda i: tf.sparse.SparseTensor([[0], [2]], [i, i + 1], [5])
    )


def test_ragged_and_sparse_pipelines_are_compared_element_by_element():
    tags = tf.ragged.constant([[i % 7 + 1] * (1 + i % 5) for i in range(60)], dtype=tf.int64)
    ragged = tf.data.Dataset.from_tensor_slices((tags, tf.range(60)))
    assert_deterministic(ragged.shuffle(60, seed=3).ragged_batch(8))
    assert_deterministic(_gapped_sparse().batch(4))
    with pytest.raises(AssertionError, match=r"feature 'element': int64\[8, 5\]"):
        assert_deterministic(lambda seed: _gapped_sparse().shuffle(40).batch(8), 1)
