"""Measures an input pipeline alone, without a model: examples/s, batches/s and MB/s of the
full tuned pipeline, of each stage prefix and, on request, of the workload's original
pipeline, warm-up excluded, repeats interleaved (A B A B ...). Printing is cli/bench.py's job.

The JSON of a report (`BenchReport.to_json()`), format "tfperf.bench/1":

- ``format``, ``tf_version``, ``cpus``: what produced the numbers;
- ``run_file``, ``workload``, ``split``, ``batch_size``: what was measured;
- ``repeats``, ``batches``, ``warmup``: measured batches per run and the batches
  pulled (and not timed) before each run; every run starts a fresh iterator;
- ``tuned``: the full tuned pipeline (a *measurement*, below);
- ``original``: the workload's original pipeline, or null without ``compare``;
- ``stages``: measurements of each stage prefix in pipeline order (``read``,
  ``+shuffle``, ``+batch``, ``+parse``, ``+preprocess``, ``+prefetch``; ``+cache_records``
  and ``+cache`` when enabled); the last one is the full pipeline (the same runs as
  ``tuned``); empty with stages off or for a user's own data.pipeline;
- ``ratios``: ``tuned_over_original`` (median examples/s, null without ``compare``) and
  ``tuned_over_read`` (the full pipeline against the read-only bound: the same shards read
  and batched, nothing parsed; null without stages).

A *measurement*: ``name`` (``tuned``, ``original`` or a stage label), ``variant``
(``tuned``/``original``), ``stage`` (the make_dataset stop_after, or null),
``examples_per_s``, ``batches_per_s``, ``mb_per_s`` and ``cpu_us_per_example`` each as
{median, min, max} over the repeats (MB = 10^6 bytes of serialized records, from the
manifest's bytes/records, null when unknown; CPU time is the whole process's, all threads,
steadier than wall time when other jobs share the machine), ``record_bytes`` and ``runs``
(one {seconds, batches, examples, cpu_seconds} per repeat).
Prefixes before ``batch`` yield single records: they are batched (a cheap batch of
strings) for the measurement and count each record as one example.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tfperf.config import RunConfig
from tfperf.errors import UserError

FORMAT = "tfperf.bench/1"
# Defaults sized so that a whole default bench of the chess workload (six stage prefixes,
# three repeats) stays under about a minute on 2 CPU cores.
DEFAULT_BATCHES = 100
DEFAULT_WARMUP = 10
DEFAULT_REPEATS = 3
# Stages whose output is single records: bench batches them itself.
_UNBATCHED = ("read", "cache_records", "shuffle", "repeat")


@dataclass(frozen=True)
class Stat:
    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        return cls(statistics.median(values), min(values), max(values))

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max}


@dataclass(frozen=True)
class Run:
    seconds: float
    batches: int
    examples: int
    # CPU time of this whole process (all TensorFlow threads) while timing: steadier than
    # wall time on a machine shared with other jobs.
    cpu_seconds: float = 0.0


@dataclass
class Measurement:
    """One pipeline (or prefix) measured `repeats` times."""

    name: str
    variant: str
    stage: str | None
    record_bytes: float | None
    runs: list[Run] = field(default_factory=list)

    def _stat(self, fn: Callable[[Run], float]) -> Stat:
        return Stat.of([fn(r) for r in self.runs])

    @property
    def examples_per_s(self) -> Stat:
        return self._stat(lambda r: r.examples / r.seconds)

    @property
    def batches_per_s(self) -> Stat:
        return self._stat(lambda r: r.batches / r.seconds)

    @property
    def cpu_us_per_example(self) -> Stat:
        return self._stat(lambda r: r.cpu_seconds / max(1, r.examples) * 1e6)

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
            "runs": [vars(r) for r in self.runs],
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
    tuned: Measurement
    original: Measurement | None = None
    stages: list[Measurement] = field(default_factory=list)

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


def _leading_dim(element: Any) -> int:
    """Examples in one element: the leading dimension of its first tensor."""
    import tensorflow as tf

    leaf = tf.nest.flatten(element)[0]
    shape = leaf.shape
    return int(shape[0]) if shape.rank else 1


@dataclass
class _Plan:
    measurement: Measurement
    dataset: Any
    shards: Any  # data.inputs.SplitShards (to name a corrupt shard), or None


def _is_per_example(cfg: RunConfig) -> bool:
    from tfperf.inputs.datasets import workload_of

    wl = workload_of(cfg)
    return cfg.pipeline.parse == "per_example" or bool(wl and wl.per_example)


def _plans(cfg: RunConfig, *, stages: bool, compare: str | None, split: str) -> list[_Plan]:
    from tfperf.inputs.datasets import make_input_dataset, split_shards

    batch = cfg.pipeline.batch_size
    per_example = _is_per_example(cfg)

    def build(variant: str, stage: str | None) -> Any:
        ds = make_input_dataset(cfg, training=True, split=split, variant=variant, stop_after=stage)
        if stage in _UNBATCHED or (stage == "parse" and per_example):
            # A cheap batch of records (or parsed examples): Python then pulls one element
            # per batch; pulling single records would measure Python's per-call cost.
            ds = ds.batch(batch, drop_remainder=True)
        # Prefixes before `repeat` end with the epoch; the full pipeline may too.
        return ds.repeat()

    tuned = split_shards(cfg, training=True, split=split, variant="tuned")
    full = Measurement("tuned", "tuned", None, tuned.record_bytes if tuned else None)
    plans: list[_Plan] = []
    if stages and not cfg.data.pipeline:
        for stage in stage_prefixes(cfg, per_example):
            m = (
                full
                if stage == "prefetch"
                else Measurement(_label(stage), "tuned", stage, full.record_bytes)
            )
            plans.append(_Plan(m, build("tuned", stage), tuned))
        # The full pipeline is the last prefix: measured once, reported as `tuned` too.
        full.stage = "prefetch"
    else:
        plans.append(_Plan(full, build("tuned", None), tuned))
    if compare is not None:
        # Appended after the full pipeline, so that the pair runs back to back.
        orig_shards = split_shards(cfg, training=True, split=split, variant="original")
        orig = Measurement(
            "original", "original", None, orig_shards.record_bytes if orig_shards else None
        )
        plans.append(_Plan(orig, build("original", None), orig_shards))
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
    progress=True shows a rich progress bar on stderr.
    """
    from tfperf.inputs.datasets import ensure_workload_data

    for name, value, low in (("repeats", repeats, 1), ("batches", batches, 1),
                             ("warmup", warmup, 0)):  # fmt: skip
        if value < low:
            raise UserError(f"--{name}: expected an integer >= {low}, found {value}")
    _check_compare(cfg, compare)
    if cfg.workload and not cfg.data.pipeline:
        ensure_workload_data(cfg, progress=progress)
    split = split or cfg.data.train_split
    plans = _plans(cfg, stages=stages, compare=compare, split=split)
    _measure(plans, repeats=repeats, batches=batches, warmup=warmup, progress=progress)
    by_name = {p.measurement.name: p.measurement for p in plans}
    return BenchReport(
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
        if stages and not cfg.data.pipeline
        else [],
    )


def measure_datasets(
    datasets: Mapping[str, Any],
    *,
    repeats: int = DEFAULT_REPEATS,
    batches: int = DEFAULT_BATCHES,
    warmup: int = DEFAULT_WARMUP,
    record_bytes: float | None = None,
    progress: bool = False,
) -> dict[str, Measurement]:
    """Measures any batched datasets side by side, repeats interleaved (benchmarks use this
    to compare variants). Each is repeated, so a short one never runs dry."""
    plans = [
        _Plan(Measurement(name, "tuned", None, record_bytes), ds.repeat(), None)
        for name, ds in datasets.items()
    ]
    _measure(plans, repeats=repeats, batches=batches, warmup=warmup, progress=progress)
    return {p.measurement.name: p.measurement for p in plans}


def _measure(
    plans: list[_Plan], *, repeats: int, batches: int, warmup: int, progress: bool
) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(plans) * repeats * (warmup + batches)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not progress,
    )
    with bar:
        task = bar.add_task("bench", total=total)
        # Round-robin over the pipelines in every repeat (A B A B ...): a slow moment of
        # the machine then hits all of them, not one.
        for r in range(repeats):
            for plan in plans:
                m = plan.measurement
                bar.update(task, description=f"{m.name} (run {r + 1}/{repeats})")
                m.runs.append(_one_run(plan, batches, warmup, lambda: bar.advance(task)))


def _one_run(plan: _Plan, batches: int, warmup: int, tick: Callable[[], None]) -> Run:
    from tfperf.data.pipeline import naming_corrupt_shards

    sh = plan.shards
    guard = naming_corrupt_shards(sh.files, sh.compression) if sh else contextlib.nullcontext()
    with guard:
        return _timed(plan, batches, warmup, tick)


def _timed(plan: _Plan, batches: int, warmup: int, tick: Callable[[], None]) -> Run:
    # A fresh iterator per run: its buffers fill during the warm-up, outside the timing.
    it = iter(plan.dataset)
    try:
        for _ in range(warmup):
            next(it)
            tick()
        examples = 0
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(batches):
            examples += _leading_dim(next(it))
            tick()
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
    except StopIteration:
        raise UserError(
            f"bench: pipeline '{plan.measurement.name}' produced no batches; is the split "
            "smaller than one batch (pipeline.batch_size)?"
        ) from None
    finally:
        del it  # stops its background threads before the next pipeline runs
    return Run(seconds=seconds, batches=batches, examples=examples, cpu_seconds=cpu)
