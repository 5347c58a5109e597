"""The shuffle moved before a decode (rewrites/shuffle_early.py): it crosses only maps that
take one element and give one with no random numbers, the rewritten pipeline yields the same
examples (one pass each, as multisets), and the check it carries compares both pipelines on
the same first source elements."""

from __future__ import annotations

import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.shuffle_early import early_site, shuffle_before_maps
from tfperf.measure import same_examples


def decode(i):
    image = tf.cast(tf.fill([16, 16, 3], i), tf.float32)
    return tf.image.resize(image, [24, 24]), i % 3


def _kinds(ds: tf.data.Dataset) -> list[str]:
    return [s.kind for s in lint.read_graph(ds).stages]


def test_the_shuffle_moves_before_the_decode_and_the_examples_stay_the_same():
    ds = tf.data.Dataset.range(300).map(decode, num_parallel_calls=2).shuffle(100).batch(8)
    assert _kinds(ds)[:3] == ["source", "map", "shuffle"]
    out = shuffle_before_maps(lint.read_graph(ds), ds)
    assert out is not None and _kinds(out)[:3] == ["source", "shuffle", "map"]
    assert out.element_spec == ds.element_spec
    shuffle = next(s for s in lint.read_graph(out).stages if s.kind == "shuffle")
    assert shuffle.buffer_size == 100 and shuffle.output_dtypes == ["int64"]
    assert same_examples(ds, out)
    old, new = out.doctor_check
    assert same_examples(old, new)
    # The check reads the first source elements of each: 1,000 at most, here all 300.
    assert sum(int(tf.shape(b[0])[0]) for b in new) == 300


def test_a_map_with_random_numbers_or_a_filter_keeps_the_shuffle_where_it_is():
    def augment(image, label):
        return image + tf.random.uniform([]), label

    random = tf.data.Dataset.range(50).map(decode).map(augment).shuffle(10)
    assert early_site(lint.read_graph(random)) is None
    filtered = tf.data.Dataset.range(50).filter(lambda i: i > 3).shuffle(10)
    assert early_site(lint.read_graph(filtered)) is None
    batched = tf.data.Dataset.range(50).batch(5).map(lambda x: x * 2).shuffle(10)
    assert early_site(lint.read_graph(batched)) is None
    first = tf.data.Dataset.range(50).shuffle(10).map(decode)  # already before the decode
    assert shuffle_before_maps(lint.read_graph(first), first) is None


def test_only_the_deterministic_maps_right_before_the_shuffle_move():
    def augment(image, label):
        return tf.image.random_flip_left_right(image), label

    ds = (
        tf.data.Dataset.range(60)
        .map(decode)
        .map(augment)
        .map(lambda x, y: (x / 255.0, y))
        .shuffle(20)
    )
    shuffle, first = early_site(lint.read_graph(ds))
    assert (first.index, shuffle.index) == (3, 4)  # after the random flip, before the scale
    out = shuffle_before_maps(lint.read_graph(ds), ds)
    assert _kinds(out)[:5] == ["source", "map", "map", "shuffle", "map"]
