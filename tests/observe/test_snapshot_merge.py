"""tf.data's model read between calls: a repeat that has just restarted its input holds a
fresh iterator whose stages have produced nothing (0 us/element); the last measured value of
each such stage is kept, so the slowest stage does not vanish at an epoch's end."""

from __future__ import annotations

from tfperf.observe.feed import PipelineSnapshot, PipelineStage, merge_snapshots


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
