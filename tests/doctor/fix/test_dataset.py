"""`tfperf doctor --fix` on any tf.data.Dataset (doctor/fix/dataset.py): a shuffle buffer
beyond the RAM budget is capped first and kept without a trial (the original cannot run), and
`replay` (tfperf.apply_rewrites) applies kept rewrites again by name, each on the graph the
previous one left; a name it does not know, or one that no longer applies, is a user error
unless told to skip it."""

from __future__ import annotations

import psutil
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.fix.dataset import replay
from tfperf.doctor.graph import lint
from tfperf.doctor.rules import ram
from tfperf.errors import UserError
from tfperf.measure import same_examples

CAP_SHUFFLE = ram.CAP_SHUFFLE.label  # the name --fix prints


def _stage(ds, kind):
    return next(s for s in lint.read_graph(ds).stages if s.kind == kind)


def test_optimize_caps_a_huge_shuffle_first_and_apply_rewrites_replays_it():
    per = 64 * 1024

    def pair(i):
        return tf.fill([per // 4], tf.cast(i, tf.float32)), tf.cast(i % 2, tf.float32)

    def jitter(x, y):  # random numbers: the shuffle cannot move before this map
        return x + tf.random.uniform([]), y

    ds = tf.data.Dataset.range(10**12).map(pair).map(jitter).shuffle(200_000_000).batch(8)
    rss = psutil.Process().memory_info().rss
    fast, report = tfperf.optimize(
        ds, None, ram_budget_mb=8, budget_s=5, overrides=["doctor.steps=4", "doctor.warmup=1"]
    )
    assert report.kept[0] == CAP_SHUFFLE, str(report)
    cap = report.fix.trials[0]
    assert cap.kept and "200,000,000 ->" in cap.reason and f"{per + 4:,} B" in cap.reason
    assert "budget 8.0 MiB" in cap.reason
    assert [t.name for t in report.fix.trials].count(CAP_SHUFFLE) == 1
    assert _stage(fast, "shuffle").buffer_size <= 8 * 2**20 // per
    grown = psutil.Process().memory_info().rss - rss
    assert grown < 1024 * 2**20, f"RSS grew {grown / 2**20:.0f} MiB"
    replayed = tfperf.apply_rewrites(ds, [CAP_SHUFFLE])  # the default budget: <= 1 GiB
    assert _stage(replayed, "shuffle").buffer_size < 200_000_000


def test_kept_rewrites_are_replayed_in_order():
    ds = tf.data.Dataset.range(100).map(lambda x: x * 2).batch(8)
    out = replay(ds, ["parallel batch", "prefetch at the end"], None)
    stages = lint.read_graph(out).stages
    assert _stage(out, "batch").op == "ParallelBatchDataset"
    assert stages[-1].kind == "prefetch" and stages[-1].buffer_size == lint.AUTOTUNE
    assert same_examples(ds, out)
    assert replay(ds, [], None) is ds


def test_a_rewrite_replay_cannot_apply_is_a_user_error_or_skipped():
    ds = tf.data.Dataset.range(100).batch(8).prefetch(tf.data.AUTOTUNE)
    with pytest.raises(UserError, match="unknown rewrite 'faster please'"):
        replay(ds, ["faster please"], None)
    with pytest.raises(UserError, match="'prefetch at the end' does not apply"):
        replay(ds, ["prefetch at the end"], None)
    assert replay(ds, ["prefetch at the end"], None, strict=False) is ds
    # A rewrite that refuses (nothing to vectorize in a Python map) says why.
    py = tf.data.Dataset.range(8).map(lambda x: tf.numpy_function(lambda v: v, [x], tf.int64))
    with pytest.raises(UserError, match="Skipped: nothing vectorized"):
        replay(py.batch(4), ["vectorize per-example maps"], None)


def test_optimize_moves_a_shuffle_of_decoded_examples_before_the_decode():
    def decode(i):
        return tf.fill([64 * 1024], tf.cast(i, tf.float32)), tf.cast(i % 2, tf.float32)

    ds = tf.data.Dataset.range(2000).map(decode).shuffle(500).batch(8)  # 128 MiB of buffer
    fast, report = tfperf.optimize(
        ds, None, budget_s=5, overrides=["doctor.steps=4", "doctor.warmup=1"]
    )
    codes = [f.code for f in report.diagnosis.findings]
    assert "shuffle_after_decode" in codes, codes
    move = report.fix.trials[0]
    assert move.name == "shuffle before the decode" and move.kept, str(report)
    assert "MiB less RAM" in move.reason
    assert report.kept[0] == move.name
    kinds = [s.kind for s in lint.read_graph(fast).stages]
    assert kinds.index("shuffle") < kinds.index("map"), kinds
    replayed = tfperf.apply_rewrites(ds, [move.name])
    kinds = [s.kind for s in lint.read_graph(replayed).stages]
    assert kinds.index("shuffle") < kinds.index("map"), kinds


def test_a_rewrite_that_changes_only_the_padding_keeps_the_examples():
    """The doctor's multiset check on a padded_batch pipeline: reordered examples are padded
    to other lengths (each batch to its own longest), which is not a change of examples."""
    tags = tf.ragged.constant([[i % 7 + 1] * (1 + i % 6) for i in range(64)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices(tags).map(lambda t: (t, tf.size(t)))
    reordered = ds.shuffle(64, seed=1, reshuffle_each_iteration=False).padded_batch(8)
    assert not same_examples(ds.padded_batch(8), reordered)
    assert same_examples(ds.padded_batch(8), reordered, padding=True)
    changed = ds.map(lambda t, n: (t + 1, n)).padded_batch(8)
    assert not same_examples(ds.padded_batch(8), changed, padding=True)
