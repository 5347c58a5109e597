"""The doctor's judgement: runs the probes and the graph lint on one run file's training
pipeline and model, then turns the numbers into a verdict (how input-bound the run is),
the slowest stage and findings, each with its evidence, the concrete change and the gain
it expects. Ranking: RAM risks first, then by expected speedup.

Measuring is probes.py's job, reading the graph lint.py's, applying changes fixes.py's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tfperf.doctor import lint
from tfperf.doctor.probes import (
    Rate,
    TrainingRate,
    build_target,
    element_bytes,
    leading_dim,
    measure_cardinality,
    measure_compute,
    measure_dataset,
    measure_training,
    sample_elements,
)

HIGHLY, MODERATELY = 0.20, 0.05  # input-bound fraction thresholds of the verdict
SMALL_BATCH_GAIN = 1.3  # compute at 4x the batch must be this much faster per example
PRECISION_GAIN = 1.1  # another policy must be this much faster to be advised
MIN_STAGE_SHARE = 0.05  # a map costing less of the pipeline's time is not worth changing
MIN_CACHE_SHARE = 0.25  # caching spends RAM: only for a prefix that dominates
WORK_KINDS = ("map", "map_batch", "parse", "read", "flat_map", "interleave")
MAX_PIPELINE_GAIN = 50.0  # a stage fix never promises more than this (measured ~50x at best)
# Ties in expected gain are broken by this order (the more specific cause first).
PRIORITY = ("shuffle_over_budget", "from_generator", "py_function", "per_example_parse",
            "per_example_map", "no_interleave", "sequential_map", "no_cache", "no_prefetch",
            "deterministic", "float64", "precision", "small_batch")  # fmt: skip
# Share of a stage's cost each change removes: offline work removes it all; a batched map
# pays its per-call overhead once per batch (~50x cheaper measured, 0.9 is conservative).
REMOVED = {"py_function": 1.0, "from_generator": 1.0, "per_example_parse": 0.95,
           "per_example_map": 0.9}  # fmt: skip


@dataclass
class Finding:
    code: str
    title: str
    stage: str | None  # the stage's label, when the finding is about one stage
    evidence: str  # the numbers behind it
    change: str  # what to change, concretely
    expected: str  # the gain it expects, in words
    expected_speedup: float | None  # training examples/s after / before (None: not a speed gain)
    kind: str  # "risk" (RAM), "input", "compute", "data"
    stage_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StageTiming:
    index: int
    label: str
    kind: str
    examples_per_s: float | None
    us_per_example: float | None  # time this stage adds per example
    error: str | None = None


@dataclass
class Diagnosis:
    """Everything `tfperf doctor` measured and concluded."""

    source: str
    model: str
    batch_size: int
    precision: str
    pipeline: Rate
    compute: Rate
    training: TrainingRate
    stages: list[StageTiming]
    slowest_stage: str | None
    verdict: str
    findings: list[Finding]
    variants: dict[str, float] = field(default_factory=dict)  # variant -> examples/s
    notes: list[str] = field(default_factory=list)

    @property
    def input_bound_fraction(self) -> float:
        return self.training.input_bound_fraction

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "model": self.model,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "verdict": self.verdict,
            "input_bound_fraction": round(self.input_bound_fraction, 4),
            "pipeline": self.pipeline.to_dict(),
            "compute_limit": self.compute.to_dict(),
            "training": self.training.to_dict(),
            "stages": [asdict(s) for s in self.stages],
            "slowest_stage": self.slowest_stage,
            "findings": [f.to_dict() for f in self.findings],
            "variants": {k: round(v, 1) for k, v in self.variants.items()},
            "notes": self.notes,
        }


def verdict_for(fraction: float) -> str:
    if fraction >= HIGHLY:
        return "highly input-bound"
    if fraction >= MODERATELY:
        return "moderately input-bound"
    return "not input-bound"


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def ram_budget_bytes(cfg: Any) -> int:
    """The RAM a buffer or cache may use: the run file's budget, at most half the free RAM."""
    import psutil

    return int(min(cfg.pipeline.shuffle_ram_mb * 2**20, psutil.virtual_memory().available / 2))


def _fmt(rate: float | None) -> str:
    if rate is None:
        return "?"
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:,.1f}"


# ---- measuring ------------------------------------------------------------------------
def _budget(d: Any) -> dict[str, Any]:
    return {"steps": d.steps, "warmup": d.warmup, "repeats": d.repeats,
            "min_seconds": d.min_seconds}  # fmt: skip


@dataclass
class _Context:
    """What the rules read: the graph, the measured numbers and the run file."""

    cfg: Any
    graph: lint.DatasetGraph
    pipeline: Rate
    compute: Rate
    training: TrainingRate
    stages: list[StageTiming]
    variants: dict[str, float]
    budget: int
    shuffle_bytes: dict[int, int]  # stage index -> bytes per buffered element
    cache_candidate: tuple[lint.Stage, int, int] | None  # (last stage, elements, bytes)
    nondeterministic_rate: float | None
    cores: int = field(default_factory=cpu_count)

    @property
    def limit(self) -> float:
        return max(1e-9, min(self.pipeline.examples_per_s, self.compute.examples_per_s))

    def stage_cost(self, index: int) -> float:
        for st in self.stages:
            if st.index == index and st.us_per_example is not None:
                return st.us_per_example * 1e-6
        return 0.0

    def share(self, index: int) -> float:
        """Share of the pipeline's time spent in one stage."""
        return min(1.0, self.stage_cost(index) * self.pipeline.examples_per_s)

    def pipeline_without(self, seconds_per_example: float) -> float:
        """Pipeline examples/s once `seconds_per_example` of stage time is gone."""
        p = self.pipeline.examples_per_s
        left = max(1.0 / p - seconds_per_example, 1.0 / (p * MAX_PIPELINE_GAIN))
        return 1.0 / left

    def speedup_pipeline(self, new_pipeline: float) -> float:
        return min(new_pipeline, self.compute.examples_per_s) / self.limit

    def speedup_compute(self, new_compute: float) -> float:
        return min(self.pipeline.examples_per_s, new_compute) / self.limit


def _prefix_timings(graph: lint.DatasetGraph, batch: int, cfg: Any, tick: Any) -> list[StageTiming]:
    d = cfg.doctor
    out, prev = [], None
    measurable = graph.measurable()
    # No batch stage: the elements are whole batches already (e.g. a generator of batches).
    unbatched = graph.batch_size is None
    for i, st in enumerate(measurable):
        nxt = measurable[i + 1] if i + 1 < len(measurable) else None
        if nxt is not None and nxt.kind in ("flat_map", "interleave"):
            # Its elements are file names or generator seeds, not examples: nothing to time.
            continue
        try:
            ds = lint.prefix_dataset(graph, st)
            rate = measure_dataset(ds, **_budget(d),
                                   batch_size=None if st.batched or unbatched else batch,
                                   tick=tick,
                                   label=f"stage {st.label}").examples_per_s  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - a prefix that cannot run alone is reported
            out.append(StageTiming(st.index, st.label, st.kind, None, None, str(exc)[:200]))
            continue
        # Per-example time this stage adds: prefixes are nested, so differences add up.
        cost = (1.0 / rate if rate > 0 else 0.0) - (1.0 / prev if prev else 0.0)
        out.append(StageTiming(st.index, st.label, st.kind, rate, max(0.0, cost) * 1e6))
        prev = rate
    return out


def _mean_bytes(ds: Any) -> int:
    elems = sample_elements(ds, 4)
    return int(sum(element_bytes(e) for e in elems) / max(1, len(elems)))


def diagnose(
    cfg: Any,
    *,
    dataset: Any = None,
    tick: Callable[[str], None] | None = None,
    compute_variants: bool = True,
) -> Diagnosis:
    """Measures the run file's training pipeline and model and concludes.

    `dataset` replaces the run file's pipeline (the doctor works on any tf.data.Dataset);
    `tick(label)` is called after each measurement (progress).
    """
    import tensorflow as tf

    from tfperf.inputs.datasets import make_input_dataset

    tick = tick or (lambda label: None)
    d = cfg.doctor
    ds = dataset if dataset is not None else make_input_dataset(cfg, training=True)
    graph = lint.read_graph(ds)
    batch = graph.batch_size or leading_dim(next(iter(ds)))
    notes: list[str] = []
    # (a) the pipeline alone and each stage prefix
    pipeline = measure_dataset(ds, **_budget(d),
                               tick=tick, label="pipeline")  # fmt: skip
    stages = _prefix_timings(graph, batch, cfg, tick)
    # The train step pulls inside the graph: a finite pipeline must not run dry mid-call.
    card = int(tf.data.experimental.cardinality(ds))
    train_ds = ds if card == tf.data.INFINITE_CARDINALITY else ds.repeat()
    # (b) the compute limit and (c) both together, with the same compiled train step
    target = build_target(cfg, ds.element_spec, batch)
    compute = measure_compute(target, train_ds, **_budget(d), tick=tick)  # fmt: skip
    training = measure_training(target, train_ds, **_budget(d), tick=tick)  # fmt: skip
    verdict = verdict_for(training.input_bound_fraction)
    variants: dict[str, float] = {}

    def variant(name: str, fn: Callable[[], float]) -> None:
        try:
            variants[name] = fn()
        except Exception as exc:  # noqa: BLE001 - a variant that cannot run is only a note
            notes.append(f"{name}: not measured ({type(exc).__name__}: {str(exc)[:160]})")

    # Compute-side what-ifs only matter when the input is not the clear limit.
    if compute_variants and "precision" in d.what_ifs and verdict != "highly input-bound":
        from tfperf.train.precision import supported_policies

        for policy in supported_policies():
            if policy != target.precision:
                variant(
                    f"precision={policy}",
                    lambda p=policy: _compute_at(cfg, train_ds, batch, d, tick, precision=p),
                )
    if compute_variants and "batch" in d.what_ifs:
        # A larger batch pays per-step costs (dispatch, dequeue) once for more examples:
        # the run file's own pipeline rebuilt at 4x the batch, trained for real.
        big = batch * 4
        if dataset is None:
            variant(f"training at batch={big}", lambda: _training_at(cfg, big, d, tick))
        else:
            rebatched = train_ds.unbatch().batch(big, drop_remainder=True)
            variant(f"compute at batch={big}", lambda: _compute_at(cfg, rebatched, big, d, tick))
    if lint.float64_outputs(graph):
        variant(
            "float32 inputs", lambda: _compute_at(cfg, train_ds.map(_to_float32), batch, d, tick)
        )  # noqa: E501
    nondet = None
    if _deterministic_stages(graph):
        nd = _nondeterministic(graph, ds)
        nondet = measure_dataset(nd, **_budget(d),
                                 tick=tick, label="deterministic=False").examples_per_s  # fmt: skip
    shuffle_bytes = {}
    for st in graph.stages:
        if st.kind == "shuffle" and st.index > 0:
            shuffle_bytes[st.index] = _mean_bytes(
                lint.prefix_dataset(graph, graph.stages[st.index - 1])
            )  # noqa: E501
    ctx = _Context(cfg, graph, pipeline, compute, training, stages, variants,
                   ram_budget_bytes(cfg), shuffle_bytes, _cache_candidate(graph, stages),
                   nondet)  # fmt: skip
    findings = run_rules(ctx)
    if verdict == "not input-bound":
        findings = [f for f in findings if f.kind != "input"]
        notes.append("not input-bound: the model, not the input, sets the pace")
    costly = [s for s in stages if s.us_per_example is not None]
    slowest = max(costly, key=lambda s: s.us_per_example).label if costly else None
    return Diagnosis(
        source=cfg.data.pipeline
        or (cfg.workload and f"workload {cfg.workload}")
        or (cfg.source or "run file"),  # noqa: E501
        model=getattr(target.model, "name", type(target.model).__name__),
        batch_size=batch,
        precision=target.precision,
        pipeline=pipeline,
        compute=compute,
        training=training,
        stages=stages,
        slowest_stage=slowest,
        verdict=verdict,
        findings=findings,
        variants=variants,
        notes=notes,
    )


def _to_float32(*element: Any) -> Any:
    import tensorflow as tf

    def cast(t: Any) -> Any:
        return tf.cast(t, tf.float32) if t.dtype == tf.float64 else t

    return tf.nest.map_structure(cast, element if len(element) > 1 else element[0])


def _compute_at(
    cfg: Any, ds: Any, batch: int, d: Any, tick: Any, precision: str | None = None
) -> float:  # noqa: E501
    target = build_target(cfg, ds.element_spec, batch, precision=precision)
    label = f"compute {precision or batch}"
    return measure_compute(target, ds, **_budget(d), tick=tick, label=label).examples_per_s


def _training_at(cfg: Any, batch: int, d: Any, tick: Any) -> float:
    """Training examples/s with the run file's pipeline and model at another batch size."""
    import tensorflow as tf

    from tfperf.inputs.datasets import make_input_dataset

    big = cfg.model_copy(deep=True)
    big.pipeline.batch_size = batch
    ds = make_input_dataset(big, training=True)
    if int(tf.data.experimental.cardinality(ds)) != tf.data.INFINITE_CARDINALITY:
        ds = ds.repeat()
    target = build_target(big, ds.element_spec, batch)
    label = f"training at batch {batch}"
    return measure_training(target, ds, **_budget(d), tick=tick, label=label).rate.examples_per_s


def _deterministic_stages(graph: lint.DatasetGraph) -> list[lint.Stage]:
    """Parallel stages that keep input order although training does not need it."""
    out = []
    for st in graph.stages:
        if not st.parallel and st.kind not in ("interleave",):
            continue
        if st.kind == "interleave" and st.parallelism is None:
            continue
        if st.deterministic == "true" or (
            st.deterministic in (None, "default") and graph.deterministic_option is not False
        ):
            out.append(st)
    return out


def _nondeterministic(graph: lint.DatasetGraph, ds: Any) -> Any:
    """`ds` with every parallel stage allowed to return elements out of order."""
    from tfperf.doctor.fixes import set_deterministic

    return set_deterministic(graph, ds, False)


def _cache_candidate(
    graph: lint.DatasetGraph, stages: list[StageTiming]
) -> tuple[lint.Stage, int, int] | None:
    """The end of the deterministic prefix, its element count and bytes, when finite."""
    prefix = lint.deterministic_prefix(graph)
    prefix = [s for s in prefix if s.kind not in ("options",)]
    if not prefix or len(prefix) == len(graph.stages):
        return None
    last = prefix[-1]
    ds = lint.prefix_dataset(graph, last)
    n = measure_cardinality(ds)
    if n is None:
        return None
    return last, n, n * _mean_bytes(ds)


# ---- the rules ------------------------------------------------------------------------
def run_rules(ctx: _Context) -> list[Finding]:
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(ctx))
    order = {c: i for i, c in enumerate(PRIORITY)}

    # While the input is the limit, compute changes cannot show their gain: input first.
    input_bound = ctx.training.input_bound_fraction >= MODERATELY

    def key(f: Finding) -> tuple:
        later = (f.kind == "compute") == input_bound
        return (f.kind != "risk", later, -(f.expected_speedup or 0.0), order.get(f.code, 99))

    return sorted(found, key=key)


def _stage_evidence(ctx: _Context, st: lint.Stage) -> str:
    cost = ctx.stage_cost(st.index)
    share = cost * ctx.pipeline.examples_per_s
    timing = next((t for t in ctx.stages if t.index == st.index), None)
    rate = timing.examples_per_s if timing else None
    return (f"pipeline up to {st.label}: {_fmt(rate)} ex/s; this stage adds {cost * 1e6:.1f} us "
            f"per example (~{min(share, 1.0):.0%} of the pipeline's time; pipeline "
            f"{_fmt(ctx.pipeline.examples_per_s)} ex/s, compute limit "
            f"{_fmt(ctx.compute.examples_per_s)} ex/s)")  # fmt: skip


def _stage_finding(ctx: _Context, st: lint.Stage, code: str, title: str, change: str,
                   removed: float) -> Finding:  # fmt: skip
    new_p = ctx.pipeline_without(removed * ctx.stage_cost(st.index))
    gain = ctx.speedup_pipeline(new_p)
    return Finding(code, title, st.label, _stage_evidence(ctx, st), change,
                   f"pipeline ~{_fmt(new_p)} ex/s; training ~{gain:.1f}x faster", gain, "input",
                   st.index)  # fmt: skip


def _fixed_share(ctx: _Context, st: lint.Stage) -> float:
    """Share of a stage's cost that a more specific finding already removes."""
    if st.is_generator:
        return REMOVED["from_generator"]
    if st.has_py_func:
        return REMOVED["py_function"]
    if st.has_parse and not st.batched:
        return REMOVED["per_example_parse"]
    if st.kind == "map" and not st.batched and _batch_after(ctx.graph, st):
        return REMOVED["per_example_map"]
    return 0.0


def _batch_after(graph: lint.DatasetGraph, st: lint.Stage) -> bool:
    return any(s.kind in ("batch", "map_batch") for s in graph.stages[st.index + 1 :])


def rule_py_function(ctx: _Context) -> list[Finding]:
    return [
        _stage_finding(
            ctx,
            st,
            "py_function",
            "Python function (py_function/numpy_function) in the pipeline",
            "compute it once offline and store the result in TFRecords (`tfperf "
            "convert`, the workload's offline_preprocess; seed A), or rewrite it "
            "with TensorFlow ops",
            REMOVED["py_function"],
        )  # fmt: skip
        for st in ctx.graph.stages
        if st.has_py_func and not st.is_generator
    ]


def rule_from_generator(ctx: _Context) -> list[Finding]:
    return [
        _stage_finding(
            ctx,
            st,
            "from_generator",
            "data fed from a Python generator (from_generator)",
            "write the data to TFRecord shards (`tfperf convert`) or build it in the "
            "graph (from_tensor_slices / tf ops); every element now takes a Python "
            "round trip under the GIL (seed D)",
            REMOVED["from_generator"],
        )  # fmt: skip
        for st in ctx.graph.stages
        if st.is_generator
    ]


def rule_per_example_parse(ctx: _Context) -> list[Finding]:
    return [
        _stage_finding(
            ctx,
            st,
            "per_example_parse",
            "Examples parsed one at a time before batch",
            "batch first, then parse the whole batch with one tf.io.parse_example "
            "(run file: pipeline.parse: batched; seed E)",
            REMOVED["per_example_parse"],
        )  # fmt: skip
        for st in ctx.graph.stages
        if st.has_parse and not st.batched and not st.has_py_func and _batch_after(ctx.graph, st)
    ]


def rule_per_example_map(ctx: _Context) -> list[Finding]:
    return [
        _stage_finding(
            ctx,
            st,
            "per_example_map",
            "per-example map that could run on batches",
            "move the map after batch() and write it for a batch (vectorized): the "
            "per-call overhead (~20 us) is then paid once per batch",
            REMOVED["per_example_map"],
        )  # fmt: skip
        for st in ctx.graph.stages
        if st.kind == "map"
        and not st.batched
        and not st.has_parse
        and not st.has_py_func
        and not st.is_generator
        and _batch_after(ctx.graph, st)
        and ctx.share(st.index) >= MIN_STAGE_SHARE
    ]


def rule_sequential_map(ctx: _Context) -> list[Finding]:
    out = []
    share = 1.0 - 1.0 / max(1, ctx.cores)
    for st in ctx.graph.stages:
        if (
            st.kind in ("map", "map_batch", "parse")
            and st.parallelism is None
            and ctx.share(st.index) >= MIN_STAGE_SHARE
        ):
            left = 1.0 - _fixed_share(ctx, st)
            f = _stage_finding(ctx, st, "sequential_map", "map without parallelism",
                               "pass num_parallel_calls=tf.data.AUTOTUNE (run file: "
                               "pipeline.preprocess_parallelism: auto)", share * left)  # fmt: skip
            f.evidence += f"; {ctx.cores} cores available"
            out.append(f)
    return out


def rule_no_interleave(ctx: _Context) -> list[Finding]:
    out = []
    for st in ctx.graph.stages:
        sequential = st.kind in ("read", "flat_map") or (
            st.kind == "interleave" and st.parallelism is None
        )
        if st.reads_files and sequential and (st.files or 0) > 1:
            par = min(st.files or 1, ctx.cores)
            f = _stage_finding(ctx, st, "no_interleave", f"{st.files} files read one after another",
                               "read several files at once: files.interleave(TFRecordDataset, "
                               "cycle_length=min(files, 16), num_parallel_calls=AUTOTUNE)",
                               1.0 - 1.0 / par)  # fmt: skip
            out.append(f)
    return out


def rule_no_prefetch(ctx: _Context) -> list[Finding]:
    last = [s for s in ctx.graph.stages if s.kind != "options"][-1]
    if last.kind == "prefetch":
        return []
    gain = ctx.limit / max(1e-9, ctx.training.rate.examples_per_s)
    return [Finding(
        "no_prefetch", "no prefetch at the end of the pipeline", last.label,
        f"training {_fmt(ctx.training.rate.examples_per_s)} ex/s with input and compute taking "
        f"turns; pipeline {_fmt(ctx.pipeline.examples_per_s)} ex/s, compute limit "
        f"{_fmt(ctx.compute.examples_per_s)} ex/s",
        "end the pipeline with .prefetch(tf.data.AUTOTUNE) (run file: pipeline.prefetch: auto)",
        f"input overlaps the step: training ~{_fmt(ctx.limit)} ex/s (~{gain:.1f}x)", gain,
        "input", last.index)]  # fmt: skip


def rule_shuffle_budget(ctx: _Context) -> list[Finding]:
    out = []
    for st in ctx.graph.stages:
        per = ctx.shuffle_bytes.get(st.index)
        if st.kind != "shuffle" or per is None or not st.buffer_size or st.buffer_size < 0:
            continue
        from tfperf.data.pipeline import SHUFFLE_OVERHEAD_BYTES, plan_shuffle_buffer

        plan = plan_shuffle_buffer(st.buffer_size, per, ctx.budget / 2**20)
        if plan.granted >= plan.requested:
            continue
        out.append(Finding(
            "shuffle_over_budget", "shuffle buffer larger than the RAM budget", st.label,
            f"{st.buffer_size:,} elements x {per:,} B (+{SHUFFLE_OVERHEAD_BYTES} B each) = "
            f"{plan.requested_bytes / 2**20:,.1f} MiB; budget {ctx.budget / 2**20:,.1f} MiB "
            "(pipeline.shuffle_ram_mb, at most half the free RAM)",
            f"shuffle with a buffer of at most {plan.granted:,} elements, and shuffle the file "
            "order so that a smaller buffer still mixes well",
            "no swapping (seed A: records swapped to disk starve the model)", None, "risk",
            st.index))  # fmt: skip
    return out


def rule_no_cache(ctx: _Context) -> list[Finding]:
    if ctx.cache_candidate is None or any(s.kind == "cache" for s in ctx.graph.stages):
        return []
    last, n, size = ctx.cache_candidate
    prefix = [s for s in ctx.graph.stages if s.index <= last.index]
    if size > ctx.budget or not any(s.kind in WORK_KINDS for s in prefix):
        return []
    # Count only what the stage's own, more specific fix would leave.
    cost = sum(ctx.stage_cost(s.index) * (1.0 - _fixed_share(ctx, s)) for s in prefix)
    if cost * ctx.pipeline.examples_per_s < MIN_CACHE_SHARE:
        return []
    new_p = ctx.pipeline_without(cost)
    gain = ctx.speedup_pipeline(new_p)
    return [Finding(
        "no_cache", "expensive deterministic work repeated every epoch", last.label,
        f"stages up to {last.label} are deterministic and cost {cost * 1e6:.1f} us per example "
        f"(~{min(cost * ctx.pipeline.examples_per_s, 1):.0%} of the pipeline); their {n:,} "
        f"elements take ~{size / 2**20:,.1f} MiB (budget {ctx.budget / 2**20:,.0f} MiB)",
        f"add .cache() after {last.label} (before any shuffle or random augmentation; run "
        "file: pipeline.cache_preprocessed: true)",
        f"epochs after the first: pipeline ~{_fmt(new_p)} ex/s; training ~{gain:.1f}x faster",
        gain, "input", last.index)]  # fmt: skip


def rule_float64(ctx: _Context) -> list[Finding]:
    paths = lint.float64_outputs(ctx.graph)
    if not paths:
        return []
    c32 = ctx.variants.get("float32 inputs")
    gain = ctx.speedup_compute(c32) if c32 else None
    measured = (f"; compute limit with float32 inputs {_fmt(c32)} ex/s vs "
                f"{_fmt(ctx.compute.examples_per_s)} ex/s") if c32 else ""  # fmt: skip
    return [Finding(
        "float64", "float64 tensors leave the pipeline", ctx.graph.output.label,
        f"float64 outputs: {', '.join(paths)} (twice the bytes of float32 to copy to the "
        f"device; the model casts them every step){measured}",
        "cast to float32 inside the pipeline, in the batched map (seed E's original used "
        "float64 throughout)",
        "half the input bytes" + (f"; training ~{gain:.2f}x" if gain else ""), gain, "data",
        ctx.graph.output.index)]  # fmt: skip


def rule_deterministic(ctx: _Context) -> list[Finding]:
    stages = _deterministic_stages(ctx.graph)
    if not stages:
        return []
    nd = ctx.nondeterministic_rate
    gain = ctx.speedup_pipeline(nd) if nd else None
    return [Finding(
        "deterministic", "deterministic element order in training",
        ", ".join(s.label for s in stages),
        f"{len(stages)} parallel stage(s) keep input order; pipeline "
        f"{_fmt(ctx.pipeline.examples_per_s)} ex/s, with deterministic=False {_fmt(nd)} ex/s",
        "set options.deterministic = False for training (run file: pipeline.deterministic: "
        "false): a slow element no longer holds back the ones behind it",
        f"training ~{gain:.2f}x" if gain else "fewer stalls behind slow elements", gain,
        "input", stages[0].index)]  # fmt: skip


def rule_small_batch(ctx: _Context) -> list[Finding]:
    name = next((k for k in ctx.variants if "batch=" in k), None)
    if name is None:
        return []
    big = ctx.variants[name]
    batch = ctx.graph.batch_size or int(ctx.compute.examples_per_batch)
    if name.startswith("training"):
        now, what = ctx.training.rate.examples_per_s, "training"
        gain = big / max(1e-9, now)
    else:
        now, what = ctx.compute.examples_per_s, "compute limit"
        gain = ctx.speedup_compute(big)
    ratio = big / max(1e-9, now)
    if ratio < SMALL_BATCH_GAIN:
        return []
    bigger = name.split("=", 1)[1]
    return [Finding(
        "small_batch", "batch too small for the device", None,
        f"{what} at batch {batch}: {_fmt(now)} ex/s; at batch {bigger}: {_fmt(big)} ex/s "
        f"({ratio:.1f}x): per-step costs (dispatch, dequeue) dominate",
        f"use a larger batch (pipeline.batch_size: {bigger}) and scale the learning rate "
        "with it", f"training ~{gain:.1f}x faster", gain, "compute")]  # fmt: skip


def rule_precision(ctx: _Context) -> list[Finding]:
    current = ctx.compute.examples_per_s
    options = {k.split("=", 1)[1]: v for k, v in ctx.variants.items() if k.startswith("precision=")}
    if not options:
        return []
    best, rate = max(options.items(), key=lambda kv: kv[1])
    if rate < PRECISION_GAIN * current:
        return []
    gain = ctx.speedup_compute(rate)
    measured = ", ".join(f"{k} {_fmt(v)}" for k, v in options.items())
    return [Finding(
        "precision", "a faster precision policy is available", None,
        f"compute limit: current {_fmt(current)} ex/s; {measured} ex/s (measured on this "
        "machine)", f"train.precision: {best} (or auto: measured at start-up)",
        f"training ~{gain:.1f}x faster", gain, "compute")]  # fmt: skip


RULES = (rule_shuffle_budget, rule_py_function, rule_from_generator, rule_per_example_parse,
         rule_per_example_map, rule_sequential_map, rule_no_interleave, rule_no_cache,
         rule_no_prefetch, rule_deterministic, rule_float64, rule_small_batch,
         rule_precision)  # fmt: skip
