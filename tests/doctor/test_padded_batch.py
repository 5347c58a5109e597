"""A user pipeline that parses variable-length examples one at a time and pads them with
padded_batch: the doctor times the parse stage (its examples cannot stack: they are
batched as ragged to be timed), advises the by-hand batch parse with padding, and --fix
leaves the padded_batch's map where it is instead of failing a trial on it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfperf  # noqa: E402
from tfperf.doctor import lint  # noqa: E402
from tfperf.doctor.rewrites import batch_before_map  # noqa: E402

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
