"""Which map --fix's 'batch before per-example map' moves, on users' pipelines. Variable-length
examples parsed one at a time and padded with padded_batch: the doctor times the parse
stage (its examples cannot stack: they are batched as ragged to be timed), advises the
by-hand batch parse with padding, and leaves the padded_batch's map where it is. Images
decoded per file, batched, unbatched and augmented (keras.utils.image_dataset_from_directory
then .unbatch().map(aug)): the decode stays, the augmentation moves."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import tfperf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.edits import batch_before_map

FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]
SPEC = {"tokens": tf.io.VarLenFeature(tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}


def _records(n: int = 512) -> list[bytes]:
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        ids = rng.integers(1, 100, int(rng.integers(3, 40)))
        feats = {
            "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(ids[0] > 50)])),
        }
        ex = tf.train.Example(features=tf.train.Features(feature=feats))
        out.append(ex.SerializeToString())
    return out


def _parse(rec):
    ex = tf.io.parse_single_example(rec, SPEC)
    return {"tokens": tf.cast(tf.sparse.to_dense(ex["tokens"]), tf.int32)}, ex["label"]


def padded_pipeline(batch_size: int = 32) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices(_records()).map(_parse)
    return ds.padded_batch(batch_size, padded_shapes=({"tokens": [None]}, []))


def test_the_parse_before_padded_batch_is_timed_and_advised():
    diag = tfperf.diagnose(padded_pipeline(), None, overrides=[*FAST, "doctor.what_ifs=[]"])
    parse = next(s for s in diag.stages if s.kind == "map")
    assert parse.error is None and parse.examples_per_s, diag.stages
    advice = next(f for f in diag.findings if f.code == "per_example_parse")
    assert "tf.sparse.to_dense" in advice.change and "padded_batch" in advice.change


def test_batch_before_map_leaves_a_padded_batch_alone():
    ds = padded_pipeline()
    assert batch_before_map(lint.read_graph(ds), ds) is None
    # a plain batch after the same kind of map still moves (the rewrite is not just off)
    plain = tf.data.Dataset.from_tensor_slices(_records(64)).map(lambda r: r + "x").batch(8)
    assert batch_before_map(lint.read_graph(plain), plain) is not None


def test_a_decoding_map_stays_and_the_augmentation_after_unbatch_moves(tmp_path):
    paths = []
    for i in range(8):
        path = str(tmp_path / f"{i}.png")
        tf.io.write_file(path, tf.io.encode_png(tf.fill([6, 6, 3], tf.constant(i, tf.uint8))))
        paths.append(path)

    def load(p):
        return tf.image.resize(tf.io.decode_png(tf.io.read_file(p), channels=3), [4, 4])

    ds = tf.data.Dataset.from_tensor_slices(paths).map(load).batch(4).unbatch()
    ds = ds.map(lambda x: x / 255.0).batch(4)
    graph = lint.read_graph(ds)
    maps = [st.label for st in graph.stages if st.kind == "map"]  # the decode ... the division
    moved, label = batch_before_map(graph, ds)
    assert label == f"batch before {maps[-1]} (vectorized)", (label, maps)
    assert lint.read_graph(moved).stages[-1].kind == "map"  # the division now runs on batches
