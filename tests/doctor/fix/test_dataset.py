"""`tfperf doctor --fix` on any tf.data.Dataset (doctor/fix/dataset.py): a shuffle buffer
beyond the RAM budget is capped first and kept without a trial (the original cannot run), and
`replay` (tfperf.apply_rewrites) applies kept rewrites again by name, each on the graph the
previous one left; a name it does not know, or one that no longer applies, is a user error
unless told to skip it."""

from __future__ import annotations

import time

import psutil
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.fix.dataset import _moved_back, replay, sample_size, sampled_same
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.budget import FIX_CLOCK, Budget, FixClock
from tfperf.doctor.rewrites.shuffle_early import early_site, shuffle_before_maps
from tfperf.doctor.rules import ram
from tfperf.doctor.rules.cache import CACHE_PREFIX
from tfperf.doctor.rules.shuffle_early import SHUFFLE_EARLY
from tfperf.errors import UserError
from tfperf.measure import same_examples
from tfperf.measure.examples import MAX_COMPARE

CAP_SHUFFLE = ram.CAP_SHUFFLE.label  # the name --fix prints
# Short probes for the shuffle moves, kept for the RAM they save or by construction (no
# timing decides them): the budget's own min_seconds (0.1-0.17 s) would time each variant
# longer than these assertions need.
SHORT = ["doctor.steps=4", "doctor.warmup=1", "doctor.min_seconds=0.05"]


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
    # 10 s: at 5 a full suite beside two CPU hogs spent it all on the diagnosis (no trial)
    fast, report = tfperf.optimize(
        ds, None, ram_budget_mb=8, budget_s=10, overrides=["doctor.steps=4", "doctor.warmup=1"]
    )
    assert report.kept and report.kept[0] == CAP_SHUFFLE, str(report)
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
    fast, report = tfperf.optimize(ds, None, budget_s=20, overrides=SHORT)
    codes = [f.code for f in report.diagnosis.findings]
    assert "shuffle_after_decode" in codes, codes
    move = report.fix.trials[0]
    assert move.name == "shuffle before the decode" and move.kept, str(report)
    assert "MiB less RAM" in move.reason
    assert report.kept[0] == move.name
    kinds = [s.kind for s in lint.read_graph(fast).stages]
    # A cache timed faster after the move caches the decoded examples and moves the shuffle
    # after it (see the next test); either way no shuffle buffer holds decoded copies.
    if CACHE_PREFIX.label in report.kept:
        assert kinds.index("cache") < kinds.index("shuffle"), kinds
        assert "moved the shuffle after the cache" in move.reason
    else:
        assert kinds.index("shuffle") < kinds.index("map"), kinds
        assert "cache" not in move.reason
    assert early_site(lint.read_graph(fast)) is None, kinds
    replayed = tfperf.apply_rewrites(ds, [move.name])
    kinds = [s.kind for s in lint.read_graph(replayed).stages]
    assert kinds.index("shuffle") < kinds.index("map"), kinds


def test_a_cache_after_the_shuffle_move_says_it_moved_the_shuffle_back_and_its_ram():
    """A shuffle moved before the decode reads as a shuffle of the source, which a cache of
    the decode moves after it, over every element: the cache's row gives the RAM it holds
    and the move's row says the cache undid its saving (a fresh clone kept both and the
    report still claimed the move's RAM)."""

    def decode(i):
        return tf.fill([64 * 1024], tf.cast(i, tf.float32)), tf.cast(i % 2, tf.float32)

    ds = tf.data.Dataset.range(2000).map(decode).shuffle(500).batch(8)
    moved = tfperf.apply_rewrites(ds, [SHUFFLE_EARLY.label])
    assert _moved_back(moved, [SHUFFLE_EARLY.label]) == ""
    both = [SHUFFLE_EARLY.label, CACHE_PREFIX.label]
    cached = tfperf.apply_rewrites(ds, both)
    kinds = [s.kind for s in lint.read_graph(cached).stages]
    assert kinds.index("map") < kinds.index("cache") < kinds.index("shuffle"), kinds
    assert early_site(lint.read_graph(cached)) is None  # no buffer of decoded copies
    assert "moved the shuffle after the cache" in _moved_back(cached, both)
    # 2,000 elements of 64Ki floats and a label: 500 MiB in the cache, the shuffle's buffer
    # holding references to them.
    assert cached.doctor_note.startswith("holds 2,000 elements in RAM, ~500.0 MiB (budget ")
    assert "moves after it, over all 2,000" in cached.doctor_note


def test_the_shuffle_move_before_a_decode_is_kept_with_random_augmentation_after_it():
    """Issue 30: a TFRecord + JPEG pipeline with random flips after its shuffle was refused
    with 'changes the examples' (a check of the whole pipeline reads the flips and the
    repeat); the move crosses only one-in-one-out maps, so it keeps the examples by
    construction and is kept unchecked."""

    def decode(i):
        return tf.fill([64 * 1024], tf.cast(i, tf.float32)), tf.cast(i % 2, tf.float32)

    def flip(x, y):
        return tf.where(tf.random.uniform([]) < 0.5, x, -x), y

    ds = tf.data.Dataset.range(2000).map(decode).shuffle(500).map(flip).batch(8).repeat()
    moved = shuffle_before_maps(lint.read_graph(ds), ds)
    assert moved is not None and not same_examples(*moved.doctor_check, limit=2000)
    # 12 s: beside two CPU hogs 5 s left a required rate abandoned and --fix skipped.
    fast, report = tfperf.optimize(ds, None, budget_s=12, overrides=SHORT)
    assert report.fix is not None and report.fix.trials, str(report)
    move = report.fix.trials[0]
    assert move.name == "shuffle before the decode" and move.kept, str(report)
    assert "by construction" in move.reason
    kinds = [s.kind for s in lint.read_graph(fast).stages]
    assert kinds.index("shuffle") < kinds.index("map"), kinds


def _slow(i):
    time.sleep(0.01)  # about 100 examples/s
    return i


def test_a_check_cut_at_its_deadline_is_retried_on_a_smaller_sample():
    """Issue 30: a check sized for a rate the pipeline does not reach is cut at its
    deadline, then retried on a quarter of the examples it reached, not dropped."""
    ds = tf.data.Dataset.range(100_000).map(lambda i: tf.numpy_function(_slow, [i], tf.int64))
    faster = ds.map(lambda i: i + 0)  # the same examples
    other = ds.map(lambda i: i + 1)
    # 30 s: a first pass cut before its first element (a busy host) retries with twice the
    # check floor, which 12 s could not spare (ExamplesOutOfTime in a full suite run).
    budget = Budget(30.0)
    token = FIX_CLOCK.set(FixClock(budget, limit=1.0, trials_left=1))
    try:
        FIX_CLOCK.get().next_trial()
        # 10,000 examples/s claimed: the first sample (20,000) cannot finish in time.
        assert sampled_same(ds, faster, 10_000.0, 1)
        assert FIX_CLOCK.get().checked >= 2  # the first attempt was cut, a later one ran
        assert not sampled_same(ds, other, 100.0, 1)
    finally:
        FIX_CLOCK.reset(token)
    assert sample_size(300.0, 60.0, 32) == 6_000  # two passes and their builds: a third each
    assert sample_size(1e6, 60.0, 32) == MAX_COMPARE
    assert sample_size(0.5, 1.0, 32) == 32  # at least one batch
    assert sample_size(None, 60.0, 32) is None


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
