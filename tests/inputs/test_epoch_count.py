"""inputs/epoch_count.py: the examples of each epoch counted in the graph as a real
pipeline runs (batched or not), each epoch's end noted when its iteration ends, and
`finished()` returning only the epochs ended since its last call."""

from __future__ import annotations

import tensorflow as tf

from tfperf.inputs.epoch_count import EpochCounter


def test_each_epochs_examples_are_counted_when_it_ends():
    counter = EpochCounter()
    epoch = counter.counted(tf.data.Dataset.range(10).batch(4), batched=True)
    assert [len(b) for b in epoch] == [4, 4, 2]  # the end marker yields nothing
    assert counter.finished() == [10]
    assert counter.finished() == []  # nothing ended since
    short = counter.counted(tf.data.Dataset.range(7).batch(4).take(1), batched=True)
    for ds in (short, epoch):
        list(ds)
    assert counter.finished() == [4, 10]  # oldest first


def test_unbatched_dict_elements_count_one_each():
    counter = EpochCounter()
    rows = tf.data.Dataset.from_tensor_slices({"x": tf.ones([6, 2]), "name": ["a"] * 6})
    out = list(counter.counted(rows, batched=False))
    assert len(out) == 6 and sorted(out[0]) == ["name", "x"]
    assert counter.finished() == [6]


def test_a_repeat_ends_an_epoch_per_pass_before_the_next_begins():
    counter = EpochCounter()
    epochs = counter.counted(tf.data.Dataset.range(3), batched=False).repeat(3)
    # Pulled on demand only: a prefetch tf.data injects may read the second pass ahead (on a
    # loaded host it once had finished it when the test asked).
    options = tf.data.Options()
    options.autotune.enabled = False
    options.experimental_optimization.inject_prefetch = False
    it = iter(epochs.with_options(options))
    for _ in range(4):  # the whole first pass and one element of the second
        next(it)
    assert counter.finished() == [3]


def test_elements_that_are_not_plain_tensors_cannot_be_counted():
    ragged = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1], [2, 3]]))
    assert EpochCounter().counted(ragged, batched=False) is None
