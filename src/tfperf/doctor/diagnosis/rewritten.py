"""The pipeline alone with the rewrites `--fix` tries first (per-example maps vectorized
over the batch, every map parallel), timed by the diagnosis beside the original: the cost
model reads their rate and CPU time instead of estimating them from the stages' costs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tfperf.config import DoctorConfig
from tfperf.doctor.evidence.evidence import PARALLEL, VECTORIZED
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.target import dataset_probe
from tfperf.doctor.rewrites.io import parallel_maps
from tfperf.doctor.rewrites.vectorize import vectorize_maps
from tfperf.measure import Measurement, Probe, compare

if TYPE_CHECKING:
    import tensorflow as tf


def _vectorized(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """The pipeline with its per-example maps vectorized, when pfor converted one (its
    fallback alone, the maps made parallel, is the other probe)."""
    result = vectorize_maps(graph, ds)
    return result.dataset if result.done else None


def rewrite_probes(
    graph: lint.DatasetGraph,
    ds: tf.data.Dataset,
    d: DoctorConfig,
    errors: dict[str, Exception],
    limit: float,
) -> list[Probe]:
    """The pipeline alone with the rewrites --fix tries first, where they change something:
    per-example maps vectorized over the batch, and every map parallel. The cost model reads
    their rate and CPU time instead of estimating them from the stages' costs."""
    builds = {
        VECTORIZED: lambda: _vectorized(graph, ds),
        PARALLEL: lambda: parallel_maps(graph, ds),
    }
    out = []
    for name, build in builds.items():
        try:
            rewritten = build()
        except Exception as exc:  # noqa: BLE001 - a rewrite that cannot be built: estimated
            errors[name] = exc
            continue
        if rewritten is not None:
            out.append(dataset_probe(name, rewritten, d, time_limit=limit))
    return out


def _timed(
    measured: dict[str, Measurement], errors: dict[str, Exception], names: tuple[str, ...]
) -> dict[str, Measurement]:
    """The rewritten pipelines among `names` that were timed without an error."""
    return {n: m for n, m in measured.items() if n in names and n not in errors}


def rewritten_costs(
    measured: dict[str, Measurement], errors: dict[str, Exception]
) -> dict[str, tuple[float, float]]:
    """(examples/s, CPU s per example) of each rewritten pipeline that was timed."""
    return {
        name: (m.examples_per_s.median, m.cpu_us_per_example.median * 1e-6)
        for name, m in _timed(measured, errors, (VECTORIZED, PARALLEL)).items()
        if m.examples_per_s.median > 0
    }


def slower_rewrites(
    pipeline: Measurement, measured: dict[str, Measurement], errors: dict[str, Exception]
) -> set[str]:
    """The rewritten pipelines whose slowness drops advice (the parallel maps: a slower
    vectorized pipeline only lowers its finding's gain) that every paired repeat timed
    slower than `pipeline`."""
    return {
        name
        for name, m in _timed(measured, errors, (PARALLEL,)).items()
        if compare(pipeline, m).verdict == "slower"
    }


def confirmed_slower(
    slower: set[str],
    probes: list[Probe],
    errors: dict[str, Exception],
    measure: Callable[[list[Probe]], dict[str, Measurement]],
) -> set[str]:
    """Those of `slower` that are slower again when timed once more beside the pipeline: a
    slower rewrite drops advice, and a busy host (another job's burst) can make every repeat
    of one round slower (seen 1 run in 15 with two CPU hogs beside a doctor)."""
    if not slower:
        return slower
    named = {p.name: p for p in probes}
    again = measure([named["pipeline"], *(named[n] for n in sorted(slower))])
    return slower & slower_rewrites(again["pipeline"], again, errors)
