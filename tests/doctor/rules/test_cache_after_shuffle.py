"""The rule added as one file (rules/cache_after_shuffle.py, CONTRIBUTING.md): a cache after a
shuffle replays the first epoch's order in every later epoch. A "data" finding with the
reorder as its change, ranked with the stage-order findings before speed advice; a shuffle
after the cache, a shuffle told not to reshuffle, or a repeat before the cache gets none."""

from __future__ import annotations

import tensorflow as tf

from tfperf.doctor.graph.user_source import UserSource
from tfperf.doctor.rules import ORDER_CODES, PRIORITY, RULES, run_rules
from tfperf.doctor.rules.cache_after_shuffle import rule_cache_after_shuffle


def _epochs(ds: tf.data.Dataset, n: int = 3) -> list[list[int]]:
    return [[int(x) for x in ds.as_numpy_iterator()] for _ in range(n)]


def test_the_order_it_names_is_really_frozen_and_its_change_unfreezes_it():
    frozen = _epochs(tf.data.Dataset.range(32).shuffle(32, seed=1).cache())
    assert frozen[0] == frozen[1] == frozen[2]
    fixed = _epochs(tf.data.Dataset.range(32).cache().shuffle(32, seed=1))
    assert fixed[0] != fixed[1] and sorted(fixed[0]) == sorted(fixed[1]) == list(range(32))


def test_a_cache_after_a_shuffle_is_a_data_finding_with_the_reorder(evidence):
    ds = tf.data.Dataset.range(64).shuffle(64).map(lambda x: x * 2).cache().batch(8)
    (f,) = rule_cache_after_shuffle(evidence(ds))
    assert f.code == "cache_after_shuffle" and f.kind == "data" and f.expected_speedup is None
    assert f.stage.startswith("cache#") and "shuffle#" in f.evidence
    assert ".cache().shuffle(buffer) instead of .shuffle(buffer).cache()" in f.change
    assert "cache before the batch" not in f.change and " (at " not in f.change
    # Batches cached: the batches themselves are the same each epoch, so cache before them.
    batched = tf.data.Dataset.range(64).shuffle(64).batch(8).cache()
    (f,) = rule_cache_after_shuffle(evidence(batched))
    assert "cache before the batch" in f.change


def test_a_shuffled_file_list_before_the_cache_counts(evidence, record_files):
    files = tf.data.Dataset.from_tensor_slices(record_files).shuffle(4)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2).cache().batch(8)
    assert [f.code for f in rule_cache_after_shuffle(evidence(ds))] == ["cache_after_shuffle"]


def test_pipelines_that_reshuffle_every_epoch_get_no_finding(evidence):
    r = tf.data.Dataset.range(64)
    for ds in (
        r.cache().shuffle(64).batch(8),
        r.shuffle(64).cache().shuffle(64).batch(8),  # the cached order is shuffled again
        r.shuffle(64, reshuffle_each_iteration=False).cache(),  # one fixed order, on purpose
        r.shuffle(64).repeat().cache(),  # an endless stream: no epoch is replayed
        r.map(lambda x: x + 1).cache().batch(8),  # nothing shuffled
    ):
        assert rule_cache_after_shuffle(evidence(ds)) == [], [
            s.label for s in evidence(ds).graph.stages
        ]


def test_it_is_registered_and_ranked_with_the_order_findings(evidence):
    (r,) = [r for r in RULES if r.code == "cache_after_shuffle"]
    assert r.detect is rule_cache_after_shuffle and r.kind == "data" and r.rewrites == ()
    assert "cache_after_shuffle" in ORDER_CODES
    assert PRIORITY.index("repeat_before_shuffle") < PRIORITY.index("cache_after_shuffle")
    assert PRIORITY.index("cache_after_shuffle") < PRIORITY.index("from_generator")
    # Input-bound, and no prefetch would promise 10x: the frozen order still comes first.
    ds = tf.data.Dataset.range(64).shuffle(64).cache().batch(8)
    rates = {"pipeline": 10.0, "compute": 10.0, "training": 1.0, "input_bound_fraction": 0.5}
    codes = [f.code for f in run_rules(evidence(ds, **rates))]
    assert codes[0] == "cache_after_shuffle" and "no_prefetch" in codes, codes


def test_the_change_names_the_users_file_and_line(evidence, tmp_path):
    lines = [
        "def make_dataset(batch_size=8):\n",
        "    ds = tf.data.Dataset.range(64).cache()  # a cache before the shuffle is fine\n",
        "    ds = ds.shuffle(64)\n",
        "    ds = ds.cache()\n",
        "    return ds.batch(batch_size)\n",
    ]
    source = UserSource(str(tmp_path / "my_input.py"), lines, 10)
    ds = tf.data.Dataset.range(64).shuffle(64).cache().batch(8)
    (f,) = rule_cache_after_shuffle(evidence(ds, source=source))
    assert f"{tmp_path / 'my_input.py'}:13: `ds = ds.cache()`" in f.change
