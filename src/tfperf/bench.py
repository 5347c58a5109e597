"""Measures an input pipeline alone, without a model: examples/s, batches/s and MB/s of the
full tuned pipeline, of each stage prefix and, on request, of the workload's original
pipeline, warm-up excluded, repeats interleaved (A B A B ...). The timing is tfperf.measure's
(batches pulled inside a compiled loop, as a train step pulls them); this module builds the
pipelines, labels them and names a corrupt shard. Printing is cli/bench.py's job.

The JSON of a report (`BenchReport.to_json()`), format "tfperf.bench/1":

- ``format``, ``tf_version``, ``cpus``: what produced the numbers;
- ``run_file``, ``workload``, ``split``, ``batch_size``: what was measured;
- ``repeats``, ``batches``, ``warmup``: measured batches per run and the batches
  pulled (and not timed) before each run (at least one, which also compiles the loop that
  pulls them); every run starts a fresh iterator;
- ``tuned``: the full tuned pipeline (a *measurement*, below);
- ``original``: the workload's original pipeline, or null without ``compare``;
- ``stages``: measurements of each stage prefix in pipeline order (``read``,
  ``+shuffle``, ``+batch``, ``+parse``, ``+preprocess``, ``+prefetch``; ``+cache_records``
  and ``+cache`` when enabled); the last one is the full pipeline (the same runs as
  ``tuned``); empty with stages off or for a user's own data.pipeline;
- ``ratios``: ``tuned_over_original`` (median examples/s, null without ``compare``) and
  ``tuned_over_read`` (the full pipeline against the reader alone, the ``read`` prefix:
  the same shards read and batched, nothing parsed; not a bound: the full pipeline runs
  its stages side by side and may beat it; null without stages).

A *measurement*: ``name`` (``tuned``, ``original`` or a stage label), ``variant``
(``tuned``/``original``), ``stage`` (the make_dataset stop_after, or null),
``examples_per_s``, ``batches_per_s``, ``mb_per_s`` and ``cpu_us_per_example`` each as
{median, min, max} over the repeats (MB = 10^6 bytes of serialized records, from the
manifest's bytes/records, null when unknown; CPU time is the whole process's, all threads,
steadier than wall time when other jobs share the machine), ``record_bytes`` and ``runs``
(one {seconds, batches, examples, cpu_seconds} per repeat).
Prefixes before ``batch`` yield single records: they are repeated (as training repeats,
so that a shuffle reads one record per record it yields) and batched (a cheap batch of
strings) for the measurement, and count each record as one example.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig
from tfperf.data.corrupt_shards import naming_corrupt_shards
from tfperf.errors import UserError
from tfperf.inputs.datasets import (
    SplitShards,
    ensure_workload_data,
    make_input_dataset,
    split_shards,
    workload_of,
)
from tfperf.inputs.service import wait_for_service
from tfperf.measure import (
    Measurement,
    Probe,
    Run,
    Stat,
    pipeline_probe,
    repeat_if_finite,
    side_by_side,
)
from tfperf.util.progress import progress_bar

if TYPE_CHECKING:
    import tensorflow as tf

FORMAT = "tfperf.bench/1"
# Defaults sized so that a whole default bench of the chess workload (six stage prefixes,
# three repeats) stays under about a minute on 2 CPU cores.
DEFAULT_BATCHES = 100
DEFAULT_WARMUP = 10
DEFAULT_REPEATS = 3
# Stages whose output is single records: bench batches them itself.
_UNBATCHED = ("read", "cache_records", "shuffle", "repeat")
# The keys of one run in the JSON (a pipeline alone never waits for a train step).
_RUN_KEYS = ("seconds", "batches", "examples", "cpu_seconds")


@dataclass
class PipelineMeasurement(Measurement):
    """One pipeline (or prefix) measured `repeats` times, with bench's labels and the size
    of its serialized records (for MB/s)."""

    variant: str = "tuned"
    stage: str | None = None
    record_bytes: float | None = None

    @property
    def mb_per_s(self) -> Stat | None:
        if self.record_bytes is None:
            return None
        b = self.record_bytes
        return self._stat(lambda r: r.examples * b / 1e6 / r.seconds)

    def to_dict(self) -> dict[str, Any]:
        mb = self.mb_per_s
        return {
            "name": self.name,
            "variant": self.variant,
            "stage": self.stage,
            "examples_per_s": self.examples_per_s.to_dict(),
            "batches_per_s": self.batches_per_s.to_dict(),
            "mb_per_s": mb.to_dict() if mb else None,
            "cpu_us_per_example": self.cpu_us_per_example.to_dict(),
            "record_bytes": self.record_bytes,
            "runs": [{k: getattr(r, k) for k in _RUN_KEYS} for r in self.runs],
        }


@dataclass
class BenchReport:
    """What `bench_pipeline` measured; `to_json()` gives the documented JSON."""

    run_file: str | None
    workload: str | None
    split: str
    batch_size: int
    repeats: int
    batches: int
    warmup: int
    tuned: PipelineMeasurement
    original: PipelineMeasurement | None = None
    stages: list[PipelineMeasurement] = field(default_factory=list)
    service: dict[str, Any] | None = None  # with pipeline.service on: see service_rates

    @property
    def tuned_over_original(self) -> float | None:
        if self.original is None:
            return None
        return self.tuned.examples_per_s.median / self.original.examples_per_s.median

    @property
    def tuned_over_read(self) -> float | None:
        read = next((m for m in self.stages if m.stage == "read"), None)
        if read is None:
            return None
        return self.tuned.examples_per_s.median / read.examples_per_s.median

    def to_dict(self) -> dict[str, Any]:
        import tensorflow as tf

        return {
            "format": FORMAT,
            "tf_version": tf.__version__,
            "cpus": os.cpu_count(),
            "run_file": self.run_file,
            "workload": self.workload,
            "split": self.split,
            "batch_size": self.batch_size,
            "repeats": self.repeats,
            "batches": self.batches,
            "warmup": self.warmup,
            "tuned": self.tuned.to_dict(),
            "original": self.original.to_dict() if self.original else None,
            "stages": [m.to_dict() for m in self.stages],
            "ratios": {
                "tuned_over_original": self.tuned_over_original,
                "tuned_over_read": self.tuned_over_read,
            },
            "service": self.service,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def stage_prefixes(cfg: RunConfig, per_example: bool) -> list[str]:
    """The make_dataset stop_after points bench measures, in pipeline order.

    `repeat` is left out (bench repeats every prefix itself); optional caches only when
    enabled; in per-example mode batching comes after preprocessing, so there is no
    separate batch prefix and `parse` is the per-example parse.
    """
    p = cfg.pipeline
    out = ["read"]
    if p.cache_records:
        out.append("cache_records")
    out.append("shuffle")
    out += ["parse", "preprocess"] if per_example else ["batch", "parse", "preprocess"]
    if p.cache_preprocessed:
        out.append("cache")
    out.append("prefetch")
    return out


def _label(stage: str) -> str:
    return stage if stage == "read" else f"+{stage}"


@dataclass
class _Plan:
    measurement: PipelineMeasurement
    dataset: tf.data.Dataset
    shards: SplitShards | None  # to name a corrupt shard


def _is_per_example(cfg: RunConfig) -> bool:
    wl = workload_of(cfg)
    return cfg.pipeline.parse == "per_example" or bool(wl and wl.per_example)


def timed_dataset(cfg: RunConfig, variant: str, stage: str | None, split: str) -> tf.data.Dataset:
    """The pipeline `variant` cut after `stage` (None: whole) as bench times it: batches."""
    ds = make_input_dataset(cfg, training=True, split=split, variant=variant, stop_after=stage)
    if stage in _UNBATCHED or (stage == "parse" and _is_per_example(cfg)):
        # Repeated before batching, as training repeats: a shuffle then keeps its buffer
        # full and reads one record per record it yields. Repeated after it, each epoch
        # ended with its buffer drained unread: with a buffer as large as the timed runs
        # (filled in the warm-up) "+shuffle" timed a buffer, not a read, and ran faster
        # than reading alone (875% of it).
        # A cheap batch of records (or parsed examples) then makes every prefix pulled
        # batch by batch, as the train step pulls the full pipeline.
        ds = repeat_if_finite(ds).batch(cfg.pipeline.batch_size, drop_remainder=True)
    return ds


def _plans(cfg: RunConfig, *, stages: bool, compare: str | None, split: str) -> list[_Plan]:
    per_example = _is_per_example(cfg)
    tuned = split_shards(cfg, training=True, split=split, variant="tuned")
    record_bytes = tuned.record_bytes if tuned else None
    full = PipelineMeasurement("tuned", record_bytes=record_bytes)
    plans: list[_Plan] = []
    if stages and not cfg.data.pipeline:
        for stage in stage_prefixes(cfg, per_example):
            m = (
                full
                if stage == "prefetch"
                else PipelineMeasurement(_label(stage), stage=stage, record_bytes=record_bytes)
            )
            plans.append(_Plan(m, timed_dataset(cfg, "tuned", stage, split), tuned))
        # The full pipeline is the last prefix: measured once, reported as `tuned` too.
        full.stage = "prefetch"
    else:
        plans.append(_Plan(full, timed_dataset(cfg, "tuned", None, split), tuned))
    if compare is not None:
        # Appended after the full pipeline, so that the pair runs back to back.
        orig_shards = split_shards(cfg, training=True, split=split, variant="original")
        orig = PipelineMeasurement(
            "original",
            variant="original",
            record_bytes=orig_shards.record_bytes if orig_shards else None,
        )
        plans.append(_Plan(orig, timed_dataset(cfg, "original", None, split), orig_shards))
    return plans


def _check_compare(cfg: RunConfig, compare: str | None) -> None:
    if compare is None:
        return
    if compare != "original":
        raise UserError(f"--compare: expected 'original', found '{compare}'")
    if cfg.data.pipeline:
        raise UserError(
            "--compare original: data.pipeline is a user pipeline; the original variant "
            "exists only for built-in workloads"
        )
    if not cfg.workload:
        raise UserError("--compare original: needs a built-in workload (set `workload`)")


def bench_pipeline(
    cfg: RunConfig,
    *,
    repeats: int = DEFAULT_REPEATS,
    batches: int = DEFAULT_BATCHES,
    warmup: int = DEFAULT_WARMUP,
    stages: bool = True,
    compare: str | None = None,
    split: str | None = None,
    progress: bool = False,
) -> BenchReport:
    """Measures the training input pipeline of `cfg` (see the module docstring for fields).

    compare="original" also measures the workload's original pipeline, interleaved with
    the tuned one in every repeat. A built-in workload's missing data is generated first.
    progress=True shows a progress bar on stderr.
    """
    for name, value, low in (
        ("repeats", repeats, 1),
        ("batches", batches, 1),
        ("warmup", warmup, 0),
    ):
        if value < low:
            raise UserError(f"--{name}: expected an integer >= {low}, found {value}")
    _check_compare(cfg, compare)
    if cfg.workload and not cfg.data.pipeline:
        ensure_workload_data(cfg, progress=progress)
    split = split or cfg.data.train_split
    plans = _plans(cfg, stages=stages, compare=compare, split=split)
    _measure(plans, repeats=repeats, batches=batches, warmup=warmup, progress=progress)
    by_name = {p.measurement.name: p.measurement for p in plans}
    measured_stages = stages and not cfg.data.pipeline
    report = BenchReport(
        run_file=cfg.source,
        workload=cfg.workload,
        split=split,
        batch_size=cfg.pipeline.batch_size,
        repeats=repeats,
        batches=batches,
        warmup=warmup,
        tuned=by_name["tuned"],
        original=by_name.get("original"),
        stages=[p.measurement for p in plans if p.measurement.variant == "tuned"]
        if measured_stages
        else [],
    )
    if cfg.pipeline.service.on:
        report.service = service_rates(cfg, report)
    return report


def service_rates(cfg: RunConfig, report: BenchReport) -> dict[str, Any]:
    """The client-side rate through the tf.data service (the full pipeline, measured), the
    rate one worker gives (client rate over the registered workers: theirs when the workers,
    not this process, are the limit) and this process's own rate without the service (the
    last prefix before the final prefetch, measured here; None with --no-stages)."""
    workers = wait_for_service(cfg)
    client = report.tuned.examples_per_s.median
    local = [m for m in report.stages if m.stage not in (None, "prefetch")]
    return {
        "address": cfg.pipeline.service.address,
        "mode": cfg.pipeline.service.mode,
        "workers": workers,
        "client_examples_per_s": client,
        "per_worker_examples_per_s": client / workers,
        "local_examples_per_s": local[-1].examples_per_s.median if local else None,
    }


def measure_datasets(
    datasets: Mapping[str, tf.data.Dataset],
    *,
    repeats: int = DEFAULT_REPEATS,
    batches: int = DEFAULT_BATCHES,
    warmup: int = DEFAULT_WARMUP,
    record_bytes: float | None = None,
    progress: bool = False,
) -> dict[str, PipelineMeasurement]:
    """Measures any batched datasets side by side, repeats interleaved (benchmarks use this
    to compare variants; `tfperf.measure.compare` judges a pair). A finite dataset is
    repeated, so a short one never runs dry."""
    plans = [
        _Plan(PipelineMeasurement(name, record_bytes=record_bytes), ds, None)
        for name, ds in datasets.items()
    ]
    _measure(plans, repeats=repeats, batches=batches, warmup=warmup, progress=progress)
    return {p.measurement.name: p.measurement for p in plans}


def _probe(plan: _Plan, batches: int, warmup: int) -> Probe:
    """tfperf.measure's pipeline probe, naming a corrupt shard and explaining an empty
    pipeline in bench's terms."""
    name = plan.measurement.name
    # One compiled call pulls all the timed batches of a run: no Python between batches,
    # so even a fast prefix is timed without per-call overhead. The bar moves per run.
    probe = pipeline_probe(name, plan.dataset, batches=batches, warmup=warmup)
    sh = plan.shards

    def run_once() -> Run:
        guard = naming_corrupt_shards(sh.files, sh.compression) if sh else contextlib.nullcontext()
        with guard:
            try:
                return probe()
            except UserError:  # the probe's only error: the dataset ended before a batch
                raise UserError(
                    f"bench: pipeline '{name}' produced no batches; is the split smaller "
                    "than one batch (pipeline.batch_size)?"
                ) from None

    return Probe(name, run_once)


def _measure(
    plans: list[_Plan], *, repeats: int, batches: int, warmup: int, progress: bool
) -> None:
    """Every plan `repeats` times, round-robin (A B A B ...), so that a slow moment of the
    machine hits all of them; the runs land in each plan's measurement."""
    names = [p.measurement.name for p in plans]

    def running(i: int) -> str:  # the run that starts after `i` runs have finished
        return f"{names[i % len(names)]} (run {i // len(names) + 1}/{repeats})"

    with progress_bar(
        running(0), total=len(plans) * repeats, enabled=progress, transient=True
    ) as bar:

        def on_run(name: str, repeat: int) -> None:
            done = repeat * len(names) + names.index(name) + 1
            bar.advance()
            if done < len(names) * repeats:
                bar.update(description=running(done))

        probes = [_probe(p, batches, warmup) for p in plans]
        measured = side_by_side(probes, repeats=repeats, on_run=on_run)
    for plan in plans:
        plan.measurement.runs = measured[plan.measurement.name].runs
