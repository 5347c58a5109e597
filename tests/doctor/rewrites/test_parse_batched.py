"""Records parsed per batch before a padded_batch, a bucketing or a filter
(doctor/rewrites/parse_batched.py): batch -> parse the batch -> unbatch yields the same
examples in the same order, with the rest of the map's function run per example when it
does more than make each VarLenFeature dense; maps it cannot cut are named with the reason;
the doctor names the parse and --fix offers the rewrite. Real TFRecord files, real tf.data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.graph.read import read_graph
from tfperf.doctor.rewrites.parse_batched import parse_per_batch, parse_sites
from tfperf.doctor.rewrites.pfor_fn import Refused
from tfperf.testing import assert_same_examples

SPEC = {
    "tokens": tf.io.VarLenFeature(tf.int64),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> str:
    """600 examples of 1-40 token ids and a label, in one TFRecord file."""
    path = tmp_path_factory.mktemp("parse_batched") / "train.tfrecord"
    rng = np.random.default_rng(3)
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(600):
            n = int(rng.integers(1, 41))
            feature = {
                "tokens": tf.train.Feature(
                    int64_list=tf.train.Int64List(value=rng.integers(0, 1000, n).tolist())
                ),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 3])),
            }
            w.write(
                tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
            )
    return str(path)


def _dense(record):
    parsed = tf.io.parse_single_example(record, SPEC)
    return tf.sparse.to_dense(parsed["tokens"]), parsed["label"]


def _trimmed(record):
    """More than a parse: a trim, a cast and a read of the record itself."""
    parsed = tf.io.parse_single_example(record, SPEC)
    tokens = tf.sparse.to_dense(parsed["tokens"])[:16]
    return {"tokens": tf.cast(tokens, tf.int32), "bytes": tf.strings.length(record)}, parsed[
        "label"
    ]


def _ops(ds: tf.data.Dataset) -> list[str]:
    return [s.op for s in read_graph(ds).stages]


def test_a_varlen_parse_before_padded_batch_is_parsed_per_batch_with_the_same_batches(records):
    ds = tf.data.TFRecordDataset(records).map(_dense).padded_batch(32)
    graph = read_graph(ds)
    assert [s.kind for s in parse_sites(graph)] == ["map"]
    out = parse_per_batch(graph, ds, records=64)
    assert out is not None and out.element_spec == ds.element_spec
    stages = read_graph(out).stages
    ops = [s.op for s in stages]
    # batch -> the parse on the batch -> (the ragged rows' encoding) unbatch -> a map that
    # only hands the rows on -> the padded batch
    at, unbatch = ops.index("BatchDatasetV2"), ops.index("UnbatchDataset")
    assert at < unbatch and ops[unbatch + 1 :] == ["ParallelMapDatasetV2", "PaddedBatchDatasetV2"]
    parses = [s.index for s in stages if "ParseExampleV2" in s.fn_ops]
    assert len(parses) == 1 and at < parses[0] < unbatch, ops
    assert "parsed 64 records per call" in out.doctor_note
    # the same padded batches, in the same order (not only the same multiset)
    for a, b in zip(ds, out, strict=True):
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b), strict=True):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_the_rest_of_the_function_runs_per_example_before_a_bucketing(records):
    ds = tf.data.TFRecordDataset(records).map(_trimmed, num_parallel_calls=2)
    ds = ds.bucket_by_sequence_length(lambda x, y: tf.shape(x["tokens"])[0], [8, 16], [16, 16, 16])
    out = parse_per_batch(read_graph(ds), ds)
    assert out is not None
    ops = _ops(out)
    assert ops.count("ParallelMapDatasetV2") == 2 and "UnbatchDataset" in ops, ops
    assert_same_examples(ds, out)


def _branching(record):
    """A tf.cond after the parse (a segmentation pipeline decodes JPEG or PNG by format)."""
    parsed = tf.io.parse_single_example(record, SPEC)
    tokens = tf.sparse.to_dense(parsed["tokens"])
    odd = tf.equal(parsed["label"] % 2, 1)
    return tf.cond(odd, lambda: tokens * 2, lambda: tokens + 1), parsed["label"]


def test_a_rest_with_a_cond_keeps_its_branch_functions(records):
    # Its branches are functions of the map's library: "Unable to find FunctionDef for
    # __inference_cond_false_126" when the new maps' graph was serialized.
    ds = tf.data.TFRecordDataset(records).map(_branching).padded_batch(16)
    out = parse_per_batch(read_graph(ds), ds)
    assert out is not None and "UnbatchDataset" in _ops(out)
    assert_same_examples(ds, out)


def test_the_new_maps_hold_their_own_reference_to_each_branch_function():
    # The eager context counts references by name: a branch another owner registered went
    # with that owner when it was collected, before the new chain was serialized (beside two
    # CPU hogs). Here that owner's removal is the one remove_function below.
    from tensorflow.python.eager import context

    from tfperf.doctor.rewrites.parse_batched import _register

    mapped = tf.data.Dataset.range(4).map(
        lambda x: tf.cond(x % 2 == 0, lambda: x * 2, lambda: x + 1)
    )
    names = [
        f.signature.name for f in mapped._map_func.function.graph.as_graph_def().library.function
    ]
    assert names, "the map's function has no branch functions"
    _register(mapped)
    ctx = context.context()
    for name in names:
        ctx.remove_function(name)
    assert all(ctx.has_function(n) for n in names), [n for n in names if not ctx.has_function(n)]


def test_a_parse_returning_sparse_tensors_before_a_filter_keeps_them(records):
    def parse(record):
        return tf.io.parse_single_example(record, SPEC)

    ds = tf.data.TFRecordDataset(records).map(parse).filter(lambda x: x["label"] > 0)
    out = parse_per_batch(read_graph(ds), ds)
    assert out is not None
    got = list(out.take(5))
    want = list(ds.take(5))
    for a, b in zip(want, got, strict=True):
        assert isinstance(b["tokens"], tf.SparseTensor)
        np.testing.assert_array_equal(a["tokens"].values, b["tokens"].values)
        np.testing.assert_array_equal(a["tokens"].dense_shape, b["tokens"].dense_shape)
        assert int(a["label"]) == int(b["label"])


def test_a_fixed_shape_parse_before_a_filter_is_parsed_per_batch_too(records):
    # The vectorizer batches a map only right before a dense batch: a filter between them
    # leaves the parse per example, and the parse per batch takes it.
    fixed = tf.data.TFRecordDataset(records).map(
        lambda r: tf.io.parse_single_example(r, {"label": SPEC["label"]})
    )
    ds = fixed.filter(lambda x: x["label"] > 0).batch(16)
    out = parse_per_batch(read_graph(ds), ds)
    assert out is not None and out.element_spec == ds.element_spec
    for a, b in zip(ds, out, strict=True):
        np.testing.assert_array_equal(a["label"].numpy(), b["label"].numpy())


def test_what_is_not_a_site_or_cannot_be_cut(records):
    base = tf.data.TFRecordDataset(records)
    # a dense batch right after: the vectorizer batches the parse
    assert not parse_sites(read_graph(base.map(_dense).batch(8)))
    # a FixedLenSequenceFeature would be padded to the batch's longest
    seq = {"tokens": tf.io.FixedLenSequenceFeature([], tf.int64, allow_missing=True)}
    ds = base.map(lambda r: tf.io.parse_single_example(r, seq)["tokens"]).padded_batch(8)
    with pytest.raises(Refused, match="FixedLenSequenceFeature"):
        parse_per_batch(read_graph(ds), ds)
    # a function that captures a tensor
    offset = tf.constant(np.arange(3, dtype=np.int64))
    ds = base.map(lambda r: _dense(r)[0] + offset[0]).padded_batch(8)
    with pytest.raises(Refused, match="captures"):
        parse_per_batch(read_graph(ds), ds)


def test_the_doctor_names_the_parse_and_fix_offers_the_rewrite(records, tmp_path: Path):
    ds = tf.data.TFRecordDataset(records).repeat().map(_dense).padded_batch(32)
    fast = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]
    _, report = tfperf.optimize(ds, None, overrides=fast, budget_s=20)
    codes = [f.code for f in report.diagnosis.findings]
    assert "per_example_parse" in codes, codes
    rows = {t.name: t for t in report.fix.trials}
    assert "parse per batch, then unbatch" in rows, list(rows)
    # tried (timed, or named as cut by the budget), never a failure
    assert not rows["parse per batch, then unbatch"].reason.startswith(
        ("Refused", "InvalidArgument", "TypeError")
    ), rows["parse per batch, then unbatch"].reason
