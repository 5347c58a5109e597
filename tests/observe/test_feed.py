"""observe/feed: the verdict from the input-bound fraction, the input wait summed per call
(FeedMeter), and tf.data's own model of a real running pipeline read as stages. Read between
calls, a repeat that has just restarted its input holds a fresh iterator whose stages have
produced nothing (0 us/element); the last measured value of each such stage is kept, so the
slowest stage does not vanish at an epoch's end."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.observe.feed import (
    FeedMeter,
    PipelineSnapshot,
    PipelineStage,
    merge_snapshots,
    pipeline_snapshot,
    tf_data_iterators,
    verdict_for,
    verdict_range,
)


def snap(*stages: tuple[str, float, int]) -> PipelineSnapshot:
    return PipelineSnapshot(1, 2.0, [PipelineStage(n, us, e, None, 0) for n, us, e in stages])


def test_a_stage_that_produced_nothing_keeps_its_last_measured_time():
    before = snap(("Prefetch", 5.0, 100), ("ForeverRepeat", 1.0, 100), ("Map", 50000.0, 90))
    after = snap(("Prefetch", 6.0, 110), ("ForeverRepeat", 1.0, 110), ("Map", 0.0, 0))
    merged = merge_snapshots(before, after)
    assert [(s.name, s.us_per_element) for s in merged.stages] == [
        ("Prefetch", 6.0),
        ("ForeverRepeat", 1.0),
        ("Map", 50000.0),
    ]
    # a stage measured anew, or another stage at that depth, is taken as it is
    other = snap(("Prefetch", 6.0, 110), ("ForeverRepeat", 1.0, 110), ("Zip", 0.0, 0))
    assert merge_snapshots(before, other).stages[2].name == "Zip"
    assert merge_snapshots(None, after) is after


@pytest.mark.parametrize(
    ("fraction", "verdict"),
    [
        (0.5, "highly input-bound"),
        (0.20, "highly input-bound"),
        (0.19, "moderately input-bound"),
        (0.05, "moderately input-bound"),
        (0.049, "not input-bound"),
        (0.0, "not input-bound"),
    ],
)
def test_verdict_thresholds(fraction, verdict):
    assert verdict_for(fraction) == verdict


@pytest.mark.parametrize(
    ("fractions", "statement"),
    [
        ([0.05, 0.14, 0.09], None),  # every repeat moderately input-bound: a clear verdict
        ([0.049, 0.14], "between input-bound and not input-bound: 5-14%"),
        ([0.30, 0.12, 0.25], "between highly and moderately input-bound: 12-30%"),
        ([0.02, 0.40], "between input-bound and not input-bound: 2-40%"),
        ([0.5], None),
        ([], None),
    ],
)
def test_a_verdict_near_a_boundary_says_so(fractions, statement):
    assert verdict_range(fractions) == statement


def test_feed_meter_sums_calls_and_means_per_step():
    meter = FeedMeter()
    assert (meter.wait_fraction, meter.wait_ms_mean, meter.buffered_mean) == (0.0, 0.0, None)
    meter.add(wait_s=0.1, wall_s=1.0, steps=10)
    meter.add(wait_s=0.3, wall_s=1.0, steps=10)
    meter.add_buffered(2)
    meter.add_buffered(4)
    assert meter.calls == 2 and meter.steps == 20
    assert meter.wait_fraction == pytest.approx(0.2)
    assert meter.wait_ms_mean == pytest.approx(20.0)
    assert meter.buffered_mean == 3.0
    assert meter.examples_per_s == 0.0  # no rows counted by these calls


def test_feed_meter_rate_counts_the_rows_trained_on():
    """A run's examples/s is the rows of its timed calls, a partial last batch its own rows
    (40 examples in batches of 32: 32 + 8, not 64)."""
    meter = FeedMeter()
    meter.add(wait_s=0.0, wall_s=0.5, steps=1, examples=32)
    meter.add(wait_s=0.0, wall_s=0.5, steps=1, examples=8)
    assert meter.examples_per_s == pytest.approx(40.0)


def test_a_running_pipeline_reads_as_its_stages_outermost_first():
    ds = tf.data.Dataset.range(400).batch(4).map(lambda x: x * 2, num_parallel_calls=2).prefetch(3)
    it = iter(ds)
    assert tf_data_iterators(it) == [it]
    for _ in range(20):
        next(it)
    snap = pipeline_snapshot(it)
    names = [s.name for s in snap.stages]
    assert names[0] == "Prefetch" and names[1].startswith("ParallelMap")
    assert names[2].startswith("Batch") and names[3] == "Range"
    par_map, batch, source = snap.stages[1:]
    assert par_map.parallelism == 2
    assert par_map.elements >= 20 and par_map.us_per_element > 0
    assert source.elements >= 4 * batch.elements  # a batch of 4 per element
    assert snap.buffer_size == 3 and 0 <= snap.buffered <= 3
    # a start node the caller does not find: no snapshot of this model
    assert pipeline_snapshot(it, start=lambda proto: None) is None


def test_without_autotune_there_is_no_model():
    options = tf.data.Options()
    options.autotune.enabled = False
    it = iter(tf.data.Dataset.range(10).batch(2).with_options(options))
    next(it)
    assert pipeline_snapshot(it) is None
    assert tf_data_iterators(object()) == []


def test_a_verdict_the_rates_put_near_the_boundary_says_why():
    from tfperf.observe.feed import near_boundary

    said = near_boundary([0.01, 0.03], "the two rates overlap")
    assert said == "between input-bound and not input-bound: 1-3% (the two rates overlap)"


def test_a_training_rate_has_the_spread_of_its_one_second_windows():
    """Calls are summed in windows of 1 s or more: the run's rate and wait, their
    wall-weighted means, lie within the slowest and fastest window; a short tail joins the
    last window, and one window gives no spread."""
    from tfperf.observe.feed import FeedMeter

    meter = FeedMeter()
    meter.add(0.1, 0.6, 1, 600)  # 1,000 ex/s ...
    meter.add(0.1, 0.6, 1, 600)  # ... closes a window of 1.2 s, 1,000 ex/s, 17% waiting
    assert meter.examples_per_s_range is None  # one window
    meter.add(0.0, 1.0, 1, 3000)  # 3,000 ex/s, no wait
    meter.add(0.05, 0.1, 1, 20)  # a tail of 0.1 s at 200 ex/s joins the window before it
    low, high = meter.examples_per_s_range
    assert (round(low), round(high)) == (1000, round(3020 / 1.1))
    assert low <= meter.examples_per_s <= high
    w_low, w_high = meter.wait_fraction_range
    assert w_low == 0.05 / 1.1 and w_high == 0.2 / 1.2
    assert w_low <= meter.wait_fraction <= w_high


def test_a_long_runs_windows_merge_two_by_two_and_keep_every_call():
    from tfperf.observe import feed

    meter = feed.FeedMeter()
    for i in range(feed.MAX_WINDOWS + 1):
        meter.add(0.0, 1.0, 1, 100 if i % 2 else 300)
    assert len(meter.windows) == (feed.MAX_WINDOWS + 2) // 2 and meter.window_s == 2.0
    assert sum(w[0] for w in meter.windows) == feed.MAX_WINDOWS + 1
    assert sum(w[2] for w in meter.windows) == meter.examples
    low, high = meter.examples_per_s_range
    assert low == 200.0 and high == 300.0  # pairs of 300 and 100; the odd last one alone
