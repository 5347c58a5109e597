"""Windows cut one at a time from arrays in the graph, cut by one gather per batch instead
(doctor/rewrites/gather.py): those of keras.utils.timeseries_dataset_from_array, and rows of
from_tensor_slices of many arrays (a DataFrame's columns; of a few, no gain worth a trial).
The rewrite yields the same examples (the same batches, in order, when nothing shuffles),
keeps what follows the batch, leaves other pipelines alone and is faster. The rule naming
it: rules/test_gather.py."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.gather import batched_gather, find_site
from tfperf.doctor.rules.gather import GATHER
from tfperf.measure import compare, pipeline_probe, same_examples, side_by_side
from tfperf.measure.examples import compare_examples


def _series(n: int = 400, cols: int = 3) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)[:, None]
    return np.sin(t / 7.0 + np.arange(cols)) * 100.0 + t  # float64, as pandas gives it


def _windows(**kw) -> tf.data.Dataset:
    data = _series()
    args = {"sequence_length": 12, "batch_size": 16, **kw}
    with_targets = args.pop("with_targets", True)
    args["targets"] = data[args["sequence_length"] :, 0] if with_targets else None
    return keras.utils.timeseries_dataset_from_array(data, **args)


def _kinds(ds: tf.data.Dataset) -> list[str]:
    return [s.kind for s in lint.read_graph(ds).stages]


def _batches(ds: tf.data.Dataset) -> list[list[np.ndarray]]:
    return [[np.asarray(t) for t in tf.nest.flatten(b)] for b in ds]


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"sequence_stride": 3},
        {"sampling_rate": 2},
        {"start_index": 5, "end_index": 300},
        {"with_targets": False},
        {"batch_size": 7},
    ],
    ids=["plain", "stride", "sampling_rate", "start_end", "no_targets", "odd_batch"],
)
def test_unshuffled_windows_are_the_same_batches_in_order(kw):
    ds = _windows(shuffle=False, **kw)
    out = batched_gather(lint.read_graph(ds), ds)
    assert out is not None
    # range -> batch -> one gather map: no per-window map, no zip left.
    assert _kinds(out) == ["source", "batch", "map"], _kinds(out)
    assert lint.read_graph(out).stages[0].op == "RangeDataset"
    before, after = _batches(ds), _batches(out)
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
            assert x.dtype == y.dtype  # float64 stays float64: the cast is another rewrite


def test_shuffled_windows_keep_the_seeded_order_and_the_examples():
    ds = _windows(shuffle=True, seed=3)
    out = batched_gather(lint.read_graph(ds), ds)
    assert out is not None and _kinds(out) == ["source", "shuffle", "batch", "map"]
    shuffle = lint.read_graph(out).stages[1]
    assert shuffle.buffer_size == 16 * 8  # Keras' own buffer, kept
    diff = compare_examples(ds, out)
    assert diff.same and diff.total_a == len(_series()) - 12, diff
    # What fix/ checks before timing: the old and new batches without their shuffles.
    old, new = out.doctor_check
    assert same_examples(old, new)
    assert "shuffle" not in _kinds(old) and "shuffle" not in _kinds(new)


def test_what_follows_the_batch_is_kept():
    """The time-series tutorial's WindowGenerator: a split map after Keras' batch."""

    def split(w):
        return w[:, :8, :], w[:, 8:, :1]

    ds = _windows(shuffle=False, with_targets=False).map(split).prefetch(2)
    out = batched_gather(lint.read_graph(ds), ds)
    assert out is not None and _kinds(out) == ["source", "batch", "map", "map", "prefetch"]
    assert out.element_spec == ds.element_spec
    for a, b in zip(_batches(ds), _batches(out), strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def _dataframe(columns: int) -> tf.data.Dataset:
    """A DataFrame's columns as a dict of (n, 1) arrays (ints, float64, strings), sliced."""
    rng = np.random.default_rng(0)
    kinds = [
        lambda: rng.integers(1, 60, size=(300, 1)),
        lambda: rng.normal(50, 10, size=(300, 1)),  # float64
        lambda: rng.choice(np.array(["Cat", "Dog"], dtype=object), size=(300, 1)),
    ]
    data = {f"c{i}": kinds[i % 3]() for i in range(columns)}
    labels = rng.integers(0, 2, size=300)
    return tf.data.Dataset.from_tensor_slices((data, labels)).shuffle(300).batch(32).prefetch(4)


def test_rows_of_a_few_in_memory_columns_are_not_offered():
    """Rows of from_tensor_slices of a few arrays, sliced and batched, measured 0.7-1.5x of
    a gather per batch: not worth a trial."""
    ds = _dataframe(2)  # two columns and the labels: three arrays
    assert find_site(lint.read_graph(ds)) is None
    assert batched_gather(lint.read_graph(ds), ds) is None


def test_rows_of_a_dataframes_many_columns_are_one_gather_per_batch():
    """Sixteen columns (the corpus' petfinder_dataframe): each example is sixteen small
    tensors; one gather per batch yields the same examples, strings and float64 kept."""
    ds = _dataframe(15)
    out = batched_gather(lint.read_graph(ds), ds)
    assert out is not None and out.element_spec == ds.element_spec
    assert same_examples(ds, out)
    assert "300 examples cut by one gather per batch: 16 arrays: one row each" in out.doctor_note


@pytest.mark.parametrize(
    "make",
    [
        # A map per example that is not a gather of a constant: vectorize's business.
        lambda: tf.data.Dataset.range(100).map(lambda x: x * 2).batch(10),
        lambda: tf.data.Dataset.from_tensor_slices(np.arange(100.0)).map(tf.sqrt).batch(10),
        # Nothing batched.
        lambda: tf.data.Dataset.from_tensor_slices(np.arange(100.0)).shuffle(10),
        # A padded batch, and a batch of rows from a generator.
        lambda: tf.data.Dataset.from_tensor_slices(np.ones((8, 3))).padded_batch(4),
        lambda: tf.data.Dataset.from_generator(
            lambda: iter(range(10)), output_signature=tf.TensorSpec([], tf.int64)
        ).batch(4),
    ],
    ids=["range_map", "slices_map", "no_batch", "padded_batch", "generator"],
)
def test_other_pipelines_are_left_alone(make):
    ds = make()
    graph = lint.read_graph(ds)
    assert find_site(graph) is None
    assert batched_gather(graph, ds) is None


def test_gather_per_batch_is_faster_and_replayed_by_name():
    ds = _windows(shuffle=True, seed=1, batch_size=32)
    out = tfperf.apply_rewrites(ds, [GATHER.label])
    assert _kinds(out)[0] == "source" and lint.read_graph(out).stages[0].op == "RangeDataset"
    probes = [pipeline_probe(k, d, batches=50, warmup=5) for k, d in (("a", ds), ("b", out))]
    m = side_by_side(probes, repeats=3)
    c = compare(m["a"], m["b"])
    # 13x measured on two idle cores; a host busy with other jobs still sees several times.
    assert c.faster and c.ratio > 2, c


def test_the_trial_note_says_how_the_windows_were_cut():
    ds = _windows(shuffle=False, sequence_stride=3, sampling_rate=2)
    out = batched_gather(lint.read_graph(ds), ds)
    n = sum(int(b[0].shape[0]) for b in ds)
    assert out.doctor_note == (
        f"{n:,} examples cut by one gather per batch: windows of 12 rows, step 2, one row each"
    ), out.doctor_note
