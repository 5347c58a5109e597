"""Crops of a per-example size padded back to a fixed shape, rewritten as masked gathers
before pfor traces the map (doctor/rewrites/masked_crop.py): the padded shape read from the
map's declared output, or proved from the paddings' arithmetic (y + h + (H - y - h) = H);
the rewritten function gives the same values per example, and under pfor the same batches.
Real TensorFlow functions and traces."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.python.saved_model import function_deserialization

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.crop_algebra import linear
from tfperf.doctor.rewrites.masked_crop import rewrite_library
from tfperf.doctor.rewrites.pfor_fn import _signatures, library_of
from tfperf.doctor.rewrites.vectorize import vectorize_maps

IMG = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3) + 1.0


def cutmix_patch(x: tf.Tensor) -> tf.Tensor:
    """CutMix's patch as users write it: tf.slice, then tf.pad back with the place and size
    drawn per example (here from the index); TensorFlow cannot tell the padded shape."""
    img = tf.constant(IMG) * tf.cast(x + 1, tf.float32)
    i = tf.cast(x, tf.int32)
    y, xx, h, w = i % 2, i % 3, i % 3 + 1, (i + 1) % 2 + 1
    patch = tf.slice(img, [y, xx, 0], [h, w, 3])
    return tf.pad(patch, [[y, 4 - y - h], [xx, 5 - xx - w], [0, 0]])


def _rewritten(ds: tf.data.Dataset) -> tuple:
    """The map's function name, its library and the library rewritten."""
    graph = lint.read_graph(ds)
    node = next(n for n in graph.graph_def.node if n.name == graph.stages[1].name)
    name = node.attr["f"].func.name
    lib = library_of(graph.graph_def, name)
    return name, lib, rewrite_library(lib, name, node.attr["output_shapes"])


def _load(lib, name: str):
    """The function `name` of `lib` as a ConcreteFunction that returns its outputs."""
    return function_deserialization.load_function_def_library(lib, _signatures(lib))[name]


def test_the_rewritten_function_gives_each_example_its_values():
    ds = tf.data.Dataset.range(12).map(cutmix_patch)
    name, lib, rewritten = _rewritten(ds)
    assert rewritten is not lib
    old, new = _load(lib, name), _load(rewritten, name)
    ops = new.graph.get_operations()
    assert "SelectV2" in {op.type for op in ops}  # the masked form replaced the pair
    assert not any(op.type == "Pad" and op.inputs[0].op.name == "Slice" for op in ops)  # the crop
    for x in range(12):
        got, want = (np.asarray(f(tf.constant(x, tf.int64)))[0] for f in (new, old))
        assert got.shape == want.shape == (4, 5, 3)
        np.testing.assert_array_equal(got, want)


def test_a_padded_shape_proved_from_the_paddings_vectorizes_with_the_same_batches():
    ds = tf.data.Dataset.range(10).map(cutmix_patch).batch(4)
    assert ds.element_spec.shape[1:3] == [None, None]  # unknown to TensorFlow
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and len(result.done) == 1
    before, after = list(ds.as_numpy_iterator()), list(result.dataset.as_numpy_iterator())
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(new, old)


def test_no_crop_or_a_fixed_crop_leaves_the_library_as_it_is():
    fixed = tf.data.Dataset.range(4).map(
        lambda x: tf.pad(
            tf.slice(tf.constant(IMG) * tf.cast(x, tf.float32), [1, 1, 0], [2, 2, 3]),
            [[1, 1], [1, 2], [0, 0]],
        )
    )
    plain = tf.data.Dataset.range(4).map(lambda x: x * 2)
    # tf.image's offsets from a static shape: stacks of constants.
    static = tf.data.Dataset.range(4).map(
        lambda x: tf.image.resize_with_crop_or_pad(tf.constant(IMG) * tf.cast(x, tf.float32), 6, 3)
    )
    for ds in (fixed, plain, static):
        _, lib, rewritten = _rewritten(ds)
        assert rewritten is lib  # pfor converts these as they are


def test_a_cutout_at_a_random_place_vectorizes_and_keeps_each_patch_in_place():
    def cutout(x):  # a random box kept, the rest zero: as tf.image pads it back
        img = tf.constant(IMG) + tf.cast(x, tf.float32)
        y = tf.random.uniform([], 0, 2, tf.int32)
        h = tf.random.uniform([], 1, 3, tf.int32)
        patch = tf.image.crop_to_bounding_box(img, y, y, h, h)
        return tf.image.pad_to_bounding_box(patch, y, y, 4, 5)

    ds = tf.data.Dataset.range(40).map(cutout).batch(8)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and len(result.done) == 1
    batches = list(result.dataset.as_numpy_iterator())
    kept = set()
    for k, batch in enumerate(batches):
        for r, out in enumerate(batch):
            img = IMG + (8 * k + r)
            np.testing.assert_array_equal(out, np.where(out != 0, img, 0))  # only img values
            rows, cols = np.nonzero(out[..., 0])
            assert rows.size == (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
            kept.add((rows.min(), rows.size))
    assert len(kept) > 1  # the boxes differ from example to example


def test_the_algebra_cancels_what_a_pad_adds_and_takes_away():
    @tf.function(input_signature=[tf.TensorSpec([], tf.int32)] * 2)
    def f(y, h):
        return tf.stack([[y, 9 - y - h], [y, 9 - h]])  # rows: y + h + (9 - y - h) = 9

    fdef = f.get_concrete_function().function_def
    by_name = {n.name: n for n in fdef.node_def}
    ref = fdef.ret[fdef.signature.output_arg[0].name]
    pack = by_name[ref.split(":")[0]].input[0]  # the Identity's input
    row = [linear(by_name, pack, k, 4) for k in range(4)]
    h = {("h", None): 1}  # an argument: an atom
    total = {x: row[0].get(x, 0) + row[1].get(x, 0) + h.get(x, 0) for x in {*row[0], *row[1], *h}}
    assert {x: c for x, c in total.items() if c} == {"": 9}
    other = {x: row[2].get(x, 0) + row[3].get(x, 0) + h.get(x, 0) for x in {*row[2], *row[3], *h}}
    assert {x: c for x, c in other.items() if c} != {"": 9}  # y is not taken away: unknown
