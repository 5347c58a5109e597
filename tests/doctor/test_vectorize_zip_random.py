"""Issue 19's CutMix-style pipeline, as far as --fix's vectorizer takes it: two shuffled
copies of an array zipped, a per-example map drawing from tf.random.gamma (stateful) with a
Python `if` (autograph's cond) and a mixing mask, then a batch. The batch moves right after
the zip (each side batched, then one map on the batch) and pfor converts the stateful
random draws per example: each example keeps its own draw. A crop and pad of a per-example
size is what it still refuses, the reason naming the op (pfor's own error, found under
TensorFlow's failure to format the loaded function's traceback)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.vectorize import vectorize_maps

N, SIDE, CLASSES = 256, 8, 10


def _pairs() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((N, SIDE, SIDE, 1), dtype=np.float32)
    y = rng.integers(0, CLASSES, N)
    a = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N)
    b = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(N)
    return tf.data.Dataset.zip((a, b))


def _lam() -> tf.Tensor:
    g1, g2 = tf.random.gamma([], 0.5), tf.random.gamma([], 0.5)
    return g1 / (g1 + g2)


@tf.function
def mix(sa, sb):
    (ia, la), (ib, lb) = sa, sb
    lam = _lam()
    if lam < 0.05:  # autograph: a cond per example
        lam = tf.constant(0.0)
    h = tf.cast(SIDE * tf.sqrt(1.0 - lam), tf.int32)
    r = tf.range(SIDE)
    mask = tf.cast((r[:, None] < h) & (r[None, :] < h), ia.dtype)[..., None]
    share = tf.cast(h * h, tf.float32) / SIDE**2
    label = tf.one_hot(la, CLASSES) * (1.0 - share) + tf.one_hot(lb, CLASSES) * share
    return ia * (1.0 - mask) + ib * mask, label


def test_zip_then_a_random_per_example_map_is_vectorized_after_the_batch():
    ds = _pairs().map(mix).batch(32)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.done and result.fallbacks == [], result.fallbacks
    kinds = [s.kind for s in lint.read_graph(result.dataset).stages]
    assert kinds[-3:] == ["other", "batch", "map"], kinds  # zip -> batch -> one map
    shares = []
    for images, labels in result.dataset:
        assert images.shape[1:] == (SIDE, SIDE, 1) and labels.shape[1:] == (CLASSES,)
        # Each example's label still sums to 1: its own draw mixes its own pair.
        np.testing.assert_allclose(tf.reduce_sum(labels, axis=1).numpy(), 1.0, rtol=1e-5)
        shares.append(labels.numpy().max(axis=1))
    # Per example, not one draw for the whole batch: the batch's mixes differ.
    assert all(len(np.unique(np.round(s, 4))) > 1 for s in shares)


def test_a_crop_of_a_per_example_size_is_still_refused_with_the_reason():
    @tf.function
    def crop_mix(sa, sb):
        (ia, la), (ib, _) = sa, sb
        h = tf.cast(SIDE * tf.sqrt(1.0 - _lam()), tf.int32) + 1
        patch = tf.image.crop_to_bounding_box(ib, 0, 0, h, h)
        return ia + tf.image.pad_to_bounding_box(patch, 0, 0, SIDE, SIDE), la

    ds = _pairs().map(crop_mix).batch(32)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.done == []
    ((label, why),) = result.fallbacks
    assert label.startswith("map#")
    assert why.startswith("the vectorizer failed on Slice: its size differs per example"), why
