"""The doctor's timing of a pipeline stage by stage: each prefix of the chain (cut after a
stage and rebuilt from the graph) as a probe, the time each stage adds per example from the
nested prefixes' rates, and the end of the cacheable prefix with its size. diagnose.py runs
the probes side by side with the others."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from tfperf.config import DoctorConfig
from tfperf.doctor.evidence.findings import Remainder, StageTiming
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import UnmeasuredBytes, mean_bytes
from tfperf.doctor.probes.target import dataset_probe
from tfperf.doctor.rewrites.cache import cacheable_prefix, count_stage, element_count
from tfperf.measure import Measurement, Probe

if TYPE_CHECKING:
    import tensorflow as tf


def stage_prefix(
    graph: lint.DatasetGraph, st: lint.GraphStage, batch: int
) -> tuple[tf.data.Dataset, int | None]:
    """The pipeline cut after `st` as the doctor times it, and the batch its elements are
    pulled in (None: they are batches already), so that every prefix counts examples."""
    ds = lint.prefix_dataset(graph, st)
    if graph.in_blocks(st):
        # Split as the later unbatch splits them: a block of records counted as one example
        # made a cheap reader look like the slowest stage (627 ex/s beside a pipeline of
        # 21,888).
        return ds.unbatch(), batch
    # No batch stage: the elements are whole batches already (e.g. a generator of batches).
    unbatched = graph.batch_size is None
    return ds, None if st.batched or unbatched else batch


def stage_probes(
    graph: lint.DatasetGraph,
    batch: int,
    d: DoctorConfig,
    errors: dict[str, Exception],
    limit: float | None = None,
) -> list[tuple[lint.GraphStage, Probe | None]]:
    """A probe per stage prefix worth timing (None when the prefix cannot be built);
    `limit`: seconds per repeat."""
    out: list[tuple[lint.GraphStage, Probe | None]] = []
    measurable = graph.measurable()
    for i, st in enumerate(measurable):
        nxt = measurable[i + 1] if i + 1 < len(measurable) else None
        if nxt is not None and nxt.kind in ("flat_map", "interleave") and not nxt.tensor_source:
            # Its elements are file names or generator seeds, not examples: nothing to time
            # (a flat_map of tensor slices splits examples or batches: those are timed).
            continue
        name = f"stage {st.label}"
        try:
            ds, per_batch = stage_prefix(graph, st, batch)
            probe = dataset_probe(name, ds, d, batch_size=per_batch, time_limit=limit)
            out.append((st, probe))
        except Exception as exc:  # noqa: BLE001 - a prefix that cannot run alone is reported
            errors[name] = exc
            out.append((st, None))
    return out


def _round_us(m: Measurement) -> dict[int, float]:
    """Microseconds per example of each round that timed something, by round index."""
    return {
        r: run.seconds / run.examples * 1e6
        for r, run in enumerate(m.runs)
        if run.seconds > 0 and run.examples > 0
    }


def paired_cost(prev: Measurement | None, cur: Measurement) -> tuple[float, float, float]:
    """(median, low, high) microseconds per example that `cur`'s last stage adds to the
    prefix `prev`, from per-round differences (round r of both ran back to back, so a slow
    moment of the host hits both). A prefix faster than the one before it is noise: the
    cost and its interval are clipped at 0, never negative."""
    now = _round_us(cur)
    before = _round_us(prev) if prev is not None else {r: 0.0 for r in now}
    diffs = [now[r] - before[r] for r in now if r in before]
    if not diffs:  # no round of both ran: the medians (unpaired), without an interval
        rate = cur.examples_per_s.median
        last = prev.examples_per_s.median if prev is not None else 0.0
        one = (1e6 / rate if rate > 0 else 0.0) - (1e6 / last if last > 0 else 0.0)
        return max(0.0, one), max(0.0, one), max(0.0, one)
    return (
        max(0.0, statistics.median(diffs)),
        max(0.0, min(diffs)),
        max(0.0, max(diffs)),
    )


def stage_timings(
    probes: list[tuple[lint.GraphStage, Probe | None]],
    measured: dict[str, Measurement],
    errors: dict[str, Exception],
) -> list[StageTiming]:
    out: list[StageTiming] = []
    prev: Measurement | None = None
    for st, _ in probes:
        name = f"stage {st.label}"
        if name in errors:
            out.append(
                StageTiming(st.index, st.label, st.kind, None, None, str(errors[name])[:200])
            )
            continue
        m = measured[name]
        # Per-example time this stage adds: prefixes are nested, so differences add up.
        cost, low, high = paired_cost(prev, m)
        out.append(
            StageTiming(
                st.index, st.label, st.kind, m.examples_per_s.median, cost, us_low=low, us_high=high
            )
        )
        prev = m
    return out


def slowest_stage(stages: list[StageTiming]) -> tuple[str | None, list[str]]:
    """The slowest stage's name and the stages it could be: one label when its cost's
    interval lies above every other's, else "map#1 or shuffle#2 (within noise)" naming
    each stage whose interval reaches the slowest one's (they tie)."""
    costly = [s for s in stages if s.us_per_example is not None]
    if not costly:
        return None, []
    ranked = sorted(costly, key=lambda s: -(s.us_per_example or 0.0))
    top = ranked[0]
    floor = top.us_low if top.us_low is not None else top.us_per_example or 0.0
    tied = [top] + [
        s
        for s in ranked[1:]
        if (s.us_high if s.us_high is not None else s.us_per_example or 0.0) >= floor
    ]
    labels = [s.label for s in tied]
    if len(labels) == 1:
        return labels[0], labels
    return " or ".join(labels) + " (within noise)", labels


def remainder(stages: list[StageTiming], pipeline: Measurement) -> Remainder | None:
    """The whole pipeline's time per example the stages' costs do not account for, when the
    two disagree beyond their intervals (None when they agree or nothing was timed): the
    sum of the stages' costs [sum of lows, sum of highs] against the pipeline's
    microseconds per example [its fastest repeat, its slowest]."""
    timed = [s for s in stages if s.us_per_example is not None]
    rate = pipeline.examples_per_s
    if not timed or rate.min <= 0:
        return None
    total = sum(s.us_per_example or 0.0 for s in timed)
    low = sum(s.us_low if s.us_low is not None else s.us_per_example or 0.0 for s in timed)
    high = sum(s.us_high if s.us_high is not None else s.us_per_example or 0.0 for s in timed)
    whole, whole_low, whole_high = 1e6 / rate.median, 1e6 / rate.max, 1e6 / rate.min
    if low <= whole_high and whole_low <= high:
        return None  # they agree within their intervals
    return Remainder(
        round(whole - total, 1),
        round(whole_low - high, 1),
        round(whole_high - low, 1),
        round(total, 1),
        round(whole, 1),
    )


def cache_candidate(graph: lint.DatasetGraph) -> tuple[lint.GraphStage, int, int] | None:
    """The end of the cacheable prefix, its element count and bytes, when finite."""
    prefix = cacheable_prefix(graph)
    if not prefix or len(prefix) == len(graph.stages):
        return None
    last = prefix[-1]
    ds = lint.prefix_dataset(graph, last)
    n = element_count(graph, count_stage(prefix))
    if n is None:
        return None
    try:
        return last, n, n * mean_bytes(ds)
    except UnmeasuredBytes:
        return None  # its size in RAM is unknown: no cache proposed
