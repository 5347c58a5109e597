"""Windows cut one at a time from arrays in the graph, cut by one gather per batch instead
(doctor/rewrites/gather.py, rules/gather.py): those of keras.utils.timeseries_dataset_from_array
(rows of from_tensor_slices alone are not offered: no gain worth a trial). The rewrite
yields the same examples (the same batches, in order, when nothing shuffles), keeps what
follows the batch, leaves other pipelines alone and is faster; its rule names it first on
the Hands-On ML windows, where repeat_before_shuffle no longer fires on Keras' own repeat."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from public_pipelines import cases

import tfperf
from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.gather import batched_gather, find_site
from tfperf.doctor.rules import PREDICTED_BY, REWRITES, run_rules
from tfperf.doctor.rules.gather import GATHER, rule_per_example_gather
from tfperf.doctor.rules.order import rule_repeat_before_shuffle
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


def test_rows_of_in_memory_columns_alone_are_not_offered():
    """Rows of from_tensor_slices, sliced and batched, measured 0.7-1.5x of a gather per
    batch: not worth a trial (the corpus' DataFrame case, petfinder_dataframe, is one)."""
    rng = np.random.default_rng(0)
    columns = {
        "age": rng.integers(1, 60, size=(300, 1)),
        "fee": rng.normal(50, 10, size=(300, 1)),  # float64
        "kind": rng.choice(np.array(["Cat", "Dog"], dtype=object), size=(300, 1)),
    }
    labels = rng.integers(0, 2, size=300)
    ds = tf.data.Dataset.from_tensor_slices((columns, labels)).shuffle(300).batch(32).prefetch(4)
    assert find_site(lint.read_graph(ds)) is None
    assert batched_gather(lint.read_graph(ds), ds) is None


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


# ---- the rule, on the Hands-On ML windows (tests/doctor/public_pipelines) ------------------
@pytest.fixture(scope="module")
def ridership(tmp_path_factory: pytest.TempPathFactory) -> tf.data.Dataset:
    case = cases.BY_NAME["ridership_mulvar"]
    folder = cases.make(case, Path(tmp_path_factory.mktemp("public")))
    return case.original(folder, case.batch_size)


def test_the_windows_finding_comes_first_and_no_repeat_finding(ridership, evidence):
    graph = lint.read_graph(ridership)
    site = find_site(graph)
    assert site is not None and site.windows and len(site.columns) == 2  # windows, targets
    # Every stage up to the batch 20 us per example, the pipeline 10,000 ex/s (input-bound).
    timings = [
        StageTiming(s.index, s.label, s.kind, 10_000.0, 20.0)
        for s in graph.stages[: site.batch.index + 1]
    ]
    rates = {"pipeline": 10_000.0, "compute": 100_000.0, "training": 10_000.0}
    ctx = evidence(ridership, **rates, input_bound_fraction=0.9, stages=timings, cores=2)
    assert rule_repeat_before_shuffle(ctx) == []  # Keras' from_tensors(array).repeat()
    (f,) = rule_per_example_gather(ctx)
    assert f.code == "per_example_gather" and f.kind == "input"
    assert "timeseries_dataset_from_array" in f.change and "tf.gather" in f.change
    assert f.expected_speedup is not None and f.expected_speedup > 3
    assert run_rules(ctx)[0].code == "per_example_gather"
    # Its rewrite is --fix's candidate under the same label.
    assert REWRITES[GATHER.label] == GATHER
    assert PREDICTED_BY[GATHER.label] == ("per_example_gather",)
    # Cheap stages (1% of the pipeline's time): nothing worth saying.
    cheap = [StageTiming(t.index, t.label, t.kind, 1e6, 0.001) for t in timings]
    assert rule_per_example_gather(evidence(ridership, **rates, stages=cheap)) == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: tf.data.Dataset.range(10).repeat().shuffle(4),
        lambda: tf.data.Dataset.range(10).repeat(3).shuffle(4).batch(2),
        # Zipped with another endless dataset: the epochs of the data do mix.
        lambda: tf.data.Dataset.zip(
            (tf.data.Dataset.range(5).repeat(), tf.data.Dataset.range(10).repeat())
        ).shuffle(4),
    ],
    ids=["repeat_forever", "repeat_3", "zip_endless"],
)
def test_a_repeat_of_the_data_before_a_shuffle_is_still_found(make, evidence):
    assert [f.code for f in rule_repeat_before_shuffle(evidence(make()))] == [
        "repeat_before_shuffle"
    ]


def test_a_constant_or_counter_repeated_for_a_zip_is_no_epoch(evidence):
    data = tf.data.Dataset.from_tensor_slices(np.arange(20))
    for repeated in (
        tf.data.Dataset.from_tensors(np.arange(5)).repeat(),
        tf.data.Dataset.range(3).repeat(),
    ):
        ds = tf.data.Dataset.zip((repeated, data)).shuffle(8).batch(4)
        assert rule_repeat_before_shuffle(evidence(ds)) == []


def test_the_trial_note_says_how_the_windows_were_cut():
    ds = _windows(shuffle=False, sequence_stride=3, sampling_rate=2)
    out = batched_gather(lint.read_graph(ds), ds)
    n = sum(int(b[0].shape[0]) for b in ds)
    assert out.doctor_note == (
        f"{n:,} examples cut by one gather per batch: windows of 12 rows, step 2, one row each"
    ), out.doctor_note
