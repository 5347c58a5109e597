"""The rules about caching (rules/cache.py): a cache after a random augmentation freezes it (a
"risk", ranked first, with the reorder as its change), and expensive deterministic work
repeated every epoch gets a cache when its elements fit the RAM budget and it costs a good
share of the pipeline's time, counting only what a more specific finding would not already
remove. Real datasets' graphs, rates as the doctor measures them; nothing runs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.graph import lint
from tfperf.doctor.rules import PREDICTED_BY
from tfperf.doctor.rules.cache import CACHE_PREFIX, rule_cache_after_random, rule_no_cache


def _images():
    x = tf.reshape(tf.range(64 * 12, dtype=tf.float32), [64, 2, 6, 1])
    return tf.data.Dataset.from_tensor_slices(x)


def _flip(x):
    # Stateless, seeded: random ops in the graph, yet the same result every run (comparable).
    return tf.image.stateless_random_flip_left_right(x, seed=[1, 2])


class _Graph:
    def __init__(self, ds):
        self.graph = lint.read_graph(ds)


def test_cache_after_random_finding_fires_only_when_the_cache_follows_the_random_map():
    frozen = rule_cache_after_random(_Graph(_images().map(_flip).cache().batch(8)))
    assert [f.code for f in frozen] == ["cache_after_random"]
    assert "frozen" in frozen[0].title and "move .cache() before" in frozen[0].change
    fresh = _images().cache().map(_flip).batch(8)
    assert rule_cache_after_random(_Graph(fresh)) == []
    # A shuffle before the cache only reorders: no finding.
    assert rule_cache_after_random(_Graph(_images().shuffle(8).cache())) == []


def _batched_work(shuffled_source: bool = False) -> tf.data.Dataset:
    """Batches of a costly deterministic map (its source shuffled first, or nothing shuffled)."""
    ds = tf.data.Dataset.from_tensor_slices(np.arange(1000.0, dtype=np.float32))
    ds = ds.shuffle(1000) if shuffled_source else ds
    return ds.batch(10).map(lambda b: tf.sqrt(b) * 2.0).prefetch(2)


def _costly(evidence, ds: tf.data.Dataset, us: float = 5000.0, size: int = 40_000, **fields):
    """Evidence of `ds` with its map taking `us` per example of a 100 ex/s pipeline and its
    cacheable prefix (up to the map) of 100 elements taking `size` bytes."""
    graph = evidence(ds).graph
    st = next(s for s in graph.stages if s.kind == "map")
    timing = [StageTiming(st.index, st.label, st.kind, 100.0, us)]
    rates = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0}
    return evidence(ds, **rates, stages=timing, cache_candidate=(st, 100, size), **fields)


def test_costly_deterministic_work_gets_a_cache(evidence):
    (f,) = rule_no_cache(_costly(evidence, _batched_work()))
    assert f.code == "no_cache" and f.kind == "input" and f.stage.startswith("map#2")
    assert "5000.0 us per example (~50% of the pipeline)" in f.evidence
    assert "100 elements take ~0.0 MiB (budget 1 MiB)" in f.evidence
    assert f.change.startswith("add .cache() after map#2") and "shuffles the source" not in f.change
    # The epochs after the first skip the map: 10 ms -> 5 ms per example.
    assert f.saves_wall == pytest.approx(5e-3) and f.expected_speedup == pytest.approx(2.0)
    assert PREDICTED_BY[CACHE_PREFIX.label] == ("no_cache",)


def test_a_source_shuffled_first_is_shuffled_after_the_cache(evidence):
    (f,) = rule_no_cache(_costly(evidence, _batched_work(shuffled_source=True)))
    assert "shuffle#1 (buffer=1000) shuffles the source: shuffle after the cache" in f.change


def test_no_cache_where_it_would_not_fit_or_not_pay(evidence):
    ds = _batched_work()
    assert rule_no_cache(_costly(evidence, ds, size=2**21)) == []  # 2 MiB > the 1 MiB budget
    assert rule_no_cache(_costly(evidence, ds, us=1000.0)) == []  # 10% of the time
    assert rule_no_cache(_costly(evidence, ds.cache())) == []  # cached already
    assert rule_no_cache(evidence(ds)) == []  # no cacheable prefix found


def test_work_a_per_example_finding_removes_is_not_counted_twice(evidence):
    # A per-example map before the batch: vectorizing it removes 90% of its cost, so the
    # cache could only save the rest (5% of the pipeline): not worth its RAM.
    ds = tf.data.Dataset.from_tensor_slices(np.arange(1000.0, dtype=np.float32))
    ds = ds.map(lambda x: tf.sqrt(x) * 2.0).batch(10).shuffle(10)
    assert rule_no_cache(_costly(evidence, ds)) == []


def test_a_cache_of_what_the_work_reads_is_moved_after_the_work(evidence):
    # The cache holds the source's elements, the costly map runs after the shuffle on every
    # epoch: the same finding, its change moving that cache, and the cost counted after it.
    # File names cached, each file read one by one (ReadFile: no batched form): 90% of the
    # time; a parallel map would remove half of it on two cores, the cache the rest.
    ds = tf.data.Dataset.from_tensor_slices([f"f{i}.txt" for i in range(100)]).cache()
    ds = ds.shuffle(1000).map(tf.io.read_file).batch(10)
    (f,) = rule_no_cache(_costly(evidence, ds, us=9000.0, cores=2))
    assert f.change.startswith("move .cache() from cache#1, where it holds what the work reads")
    assert "to after map#3" in f.change


def _serialized_tensors() -> tf.data.Dataset:
    """Records of tf.train.Example holding a serialized 2x2 tensor and a label, cached
    before their parse and shuffled, as a book's MNIST-from-TFRecords pipeline reads them."""

    def example(i: int) -> bytes:
        image = tf.io.serialize_tensor(tf.fill([2, 2], tf.cast(i, tf.uint8))).numpy()
        feature = {
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
        }
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()

    return tf.data.Dataset.from_tensor_slices([example(i) for i in range(100)]).cache()


SPEC = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def test_a_parse_the_vectorizer_refuses_keeps_its_cost_for_the_cache(evidence):
    # parse_tensor per example: no rewrite batches this parse, so caching after it is what
    # saves its cost (3.8x on the 60,000-record original); a parse the vectorizer batches is
    # the per-example finding's to claim, as before.
    def tensors(record):
        x = tf.io.parse_single_example(record, SPEC)
        return tf.io.parse_tensor(x["image"], tf.uint8), x["label"]

    def plain(record):
        x = tf.io.parse_single_example(record, SPEC)
        return x["label"] * 2, x["label"]

    refused = _serialized_tensors().shuffle(100).map(tensors).batch(10)
    (f,) = rule_no_cache(_costly(evidence, refused, us=8000.0))
    assert f.change.startswith("move .cache() from cache#1") and "after map#3" in f.change
    batched = _serialized_tensors().shuffle(100).map(plain).batch(10)
    assert rule_no_cache(_costly(evidence, batched, us=8000.0)) == []


def test_work_before_an_unbatch_is_costed_by_the_unbatch(evidence):
    # A clip's map makes many examples at once: the stages before the unbatch have no cost per
    # example, the unbatch's prefix difference carries their work (an audio set's log-mel map:
    # no cache finding until it was counted).
    clips = tf.data.Dataset.from_tensor_slices(np.zeros([100, 40], np.float32)).shuffle(100)
    ds = clips.map(lambda c: tf.reshape(tf.sqrt(c), [4, 10])).unbatch().batch(10)
    graph = evidence(ds).graph
    unbatch = next(s for s in graph.stages if s.kind == "unbatch")
    # the cacheable prefix ends with the unbatch's own map (it adds one), right before it
    mapped = [s for s in graph.stages if s.kind == "map"][-1]
    timing = [StageTiming(unbatch.index, unbatch.label, unbatch.kind, 100.0, 8000.0)]
    rates = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0}
    found = evidence(ds, **rates, stages=timing, cache_candidate=(mapped, 100, 4000))
    (f,) = rule_no_cache(found)
    assert f.stage.startswith("map#3") and f.saves_wall == pytest.approx(8e-3)
    assert rule_no_cache(evidence(ds, **rates, cache_candidate=(mapped, 100, 4000))) == []
