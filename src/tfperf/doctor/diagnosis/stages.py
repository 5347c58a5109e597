"""The doctor's timing of a pipeline stage by stage: each prefix of the chain (cut after a
stage and rebuilt from the graph) as a probe, the time each stage adds per example from the
nested prefixes' rates, and the end of the cacheable prefix with its size. diagnose.py runs
the probes side by side with the others."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfperf.config import DoctorConfig
from tfperf.doctor.evidence.findings import StageTiming
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
        if nxt is not None and nxt.kind in ("flat_map", "interleave"):
            # Its elements are file names or generator seeds, not examples: nothing to time.
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


def stage_timings(
    probes: list[tuple[lint.GraphStage, Probe | None]],
    measured: dict[str, Measurement],
    errors: dict[str, Exception],
) -> list[StageTiming]:
    out, prev = [], None
    for st, _ in probes:
        name = f"stage {st.label}"
        if name in errors:
            out.append(
                StageTiming(st.index, st.label, st.kind, None, None, str(errors[name])[:200])
            )
            continue
        rate = measured[name].examples_per_s.median
        # Per-example time this stage adds: prefixes are nested, so differences add up.
        cost = (1.0 / rate if rate > 0 else 0.0) - (1.0 / prev if prev else 0.0)
        out.append(StageTiming(st.index, st.label, st.kind, rate, max(0.0, cost) * 1e6))
        prev = rate
    return out


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
