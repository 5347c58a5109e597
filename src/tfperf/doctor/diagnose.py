"""The doctor's measurements of one run file's training, side by side in one process on the
shared core `tfperf.measure`: the pipeline alone and each of its stage prefixes, the model
fed one cached batch (the compute limit) and both together with the real train step (input
wait measured in the graph, as the training loop does); then the what-ifs. The rules turn
them into a `Diagnosis`.

Reading the graph is lint.py's job, judging rules.py's (on evidence.py's `Evidence`),
building probes target.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tfperf.doctor import lint
from tfperf.doctor.bounded import Bounded, bounded, cache_findings, mean_bytes, ram_budget_bytes
from tfperf.doctor.budget import DOCTOR_SECONDS, Budget
from tfperf.doctor.evidence import XLA_VARIANT, Evidence
from tfperf.doctor.findings import Diagnosis, StageTiming
from tfperf.doctor.generator_sample import with_generator_sample
from tfperf.doctor.rewrites import set_deterministic, to_float32
from tfperf.doctor.rewrites_cache import cacheable_prefix
from tfperf.doctor.rewritten import (
    confirmed_slower,
    rewrite_probes,
    rewritten_costs,
    slower_rewrites,
)
from tfperf.doctor.rules import run_rules
from tfperf.doctor.target import (
    build_target,
    compute_probe,
    dataset_probe,
    on_accelerator,
    train_probe,
)
from tfperf.doctor.user_source import user_source
from tfperf.inputs.datasets import make_input_dataset
from tfperf.measure import Measurement, Probe, Run, leading_dim, repeat_if_finite, side_by_side
from tfperf.observe.feed import verdict_for
from tfperf.train.precision import supported_policies
from tfperf.train.run_input import first_of
from tfperf.train.xla import host_accelerators

SERVICE_NOTE = (
    "pipeline.service is on: the pipeline's stages run on the tf.data service workers, which "
    "the doctor cannot time stage by stage; 'pipeline' is the rate this process receives "
    "from the service (set pipeline.service.mode: off to time the stages here)"
)
Tick = Callable[[str], None]  # called with a probe's name after each timed repeat


def _no_tick(label: str) -> None:
    pass


def _guarded(probe: Probe, errors: dict[str, Exception]) -> Probe:
    """`probe`, except that a failing repeat records its error in `errors` and it times
    nothing from then on: a stage or variant that cannot run is reported, not fatal."""

    def run_once() -> Run:
        if probe.name not in errors:
            try:
                return probe()
            except Exception as exc:  # noqa: BLE001 - reported with the stage or variant
                errors[probe.name] = exc
        return Run(0.0, 0, 0)

    return Probe(probe.name, run_once)


def _measure(
    probes: list[Probe], d: Any, tick: Tick, seconds: float | None = None, at_least: int = 1
) -> dict[str, Measurement]:
    """The probes side by side, `d.repeats` rounds interleaved (no new round after
    `seconds`, once `at_least` rounds ran)."""
    on_run = lambda name, _: tick(name)  # noqa: E731
    return side_by_side(
        probes, repeats=d.repeats, on_run=on_run, time_limit=seconds, min_repeats=at_least
    )


# ---- stage prefixes ----------------------------------------------------------------------
def stage_prefix(
    graph: lint.DatasetGraph, st: lint.GraphStage, batch: int
) -> tuple[Any, int | None]:
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


def _stage_probes(
    graph: lint.DatasetGraph,
    batch: int,
    d: Any,
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


def _stage_timings(
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


def _cache_candidate(graph: lint.DatasetGraph) -> tuple[lint.GraphStage, int, int] | None:
    """The end of the cacheable prefix, its element count and bytes, when finite."""
    prefix = cacheable_prefix(graph)
    if not prefix or len(prefix) == len(graph.stages):
        return None
    last = prefix[-1]
    ds = lint.prefix_dataset(graph, last)
    n = lint.known_cardinality(ds)
    if n is None:
        return None
    return last, n, n * mean_bytes(ds)


# ---- what-ifs ------------------------------------------------------------------------------
def _what_if_probes(
    cfg: Any,
    *,
    graph: lint.DatasetGraph,
    train_ds: Any,
    batch: int,
    precision: str,
    verdict: str,
    own_pipeline: bool,
    compute_variants: bool,
    errors: dict[str, Exception],
    limit: float | None = None,
) -> list[Probe]:
    """Probes of the compute-side what-ifs (other precisions, 4x the batch) and of float32
    inputs, `limit` seconds per repeat; a what-if that cannot be built is recorded in
    `errors`."""
    d = cfg.doctor
    out: list[Probe] = []

    def variant(name: str, make: Callable[[], Probe]) -> None:
        try:
            out.append(make())
        except Exception as exc:  # noqa: BLE001 - a variant that cannot run is only a note
            errors[name] = exc

    # Compute-side what-ifs only matter when the input is not the clear limit.
    if compute_variants and "precision" in d.what_ifs and verdict != "highly input-bound":
        for policy in supported_policies():
            if policy != precision:
                name = f"precision={policy}"
                variant(
                    name, lambda n=name, p=policy: _compute_at(n, cfg, train_ds, batch, p, limit)
                )
    if compute_variants and "batch" in d.what_ifs:
        # A larger batch pays per-step costs (dispatch, dequeue) once for more examples:
        # the run file's own pipeline rebuilt at 4x the batch, trained for real.
        big = batch * 4
        if own_pipeline:
            name = f"training at batch={big}"
            variant(name, lambda: _training_at(name, cfg, big, limit))
        else:
            name = f"compute at batch={big}"
            rebatched = train_ds.unbatch().batch(big, drop_remainder=True)
            variant(name, lambda: _compute_at(name, cfg, rebatched, big, None, limit))
    if compute_variants and "xla" in d.what_ifs and verdict != "highly input-bound":
        if not xla_already_on(cfg):
            name = XLA_VARIANT
            xla_cfg = cfg.model_copy(deep=True)
            xla_cfg.train.jit_compile = True
            variant(name, lambda: _compute_at(name, xla_cfg, train_ds, batch, None, limit))
    if lint.float64_outputs(graph):
        name = "float32 inputs"
        cast = train_ds.map(to_float32)
        variant(name, lambda: _compute_at(name, cfg, cast, batch, None, limit))
    return out


def xla_already_on(cfg: Any) -> bool:
    """The run already compiles its step with XLA: explicitly, or auto on an accelerator."""
    return cfg.train.jit_compile is True or (
        cfg.train.jit_compile == "auto" and bool(host_accelerators())
    )


def _compute_at(
    name: str,
    cfg: Any,
    ds: Any,
    batch: int,
    precision: str | None = None,
    limit: float | None = None,
) -> Probe:
    target = build_target(cfg, ds.element_spec, batch, precision=precision, sample=first_of(ds))
    return compute_probe(name, target, ds, cfg.doctor, limit)


class IgnoresBatchSize(Exception):
    """The run file's pipeline yields batches of another size than pipeline.batch_size."""


def _training_at(name: str, cfg: Any, batch: int, limit: float | None = None) -> Probe:
    """Training with the run file's pipeline and model at another batch size; a pipeline
    that does not yield batches of that size (it ignores batch_size) gets no such what-if."""
    big = cfg.model_copy(deep=True)
    big.pipeline.batch_size = batch
    ds = make_input_dataset(big, training=True)
    ds = bounded(ds, lint.read_graph(ds), ram_budget_bytes(cfg)).dataset
    got = real_batch(ds)
    if got != batch:
        raise IgnoresBatchSize(
            f"the pipeline yields batches of {got} with pipeline.batch_size: {batch} (it "
            "ignores batch_size), so a larger batch cannot be timed"
        )
    ds = repeat_if_finite(ds)
    target = build_target(big, ds.element_spec, batch, sample=first_of(ds))
    return train_probe(name, target, ds, cfg.doctor, limit)


def real_batch(ds: Any) -> int:
    """Examples per element of `ds`: the leading dimension of its elements (from the spec
    when static, else of the first element)."""
    import tensorflow as tf

    first = tf.nest.flatten(ds.element_spec)[0]
    shape = getattr(first, "shape", None)
    if shape is not None and shape.rank and shape[0] is not None:
        return int(shape[0])
    return leading_dim(next(iter(ds)))


def _note(name: str, exc: Exception) -> str:
    return f"{name}: not measured ({type(exc).__name__}: {str(exc)[:160]})"


# ---- the diagnosis -------------------------------------------------------------------------
def _main_probes(
    capped: Bounded,
    target: Any,
    train_ds: Any,
    batch: int,
    d: Any,
    errors: dict[str, Exception],
    budget: Budget,
    seconds: float,
    served: bool,
) -> tuple[list[Probe], list[tuple[lint.GraphStage, Probe | None]]]:
    """(a) the pipeline alone and each stage prefix, (b) the compute limit and (c) both
    together with the same compiled train step, each repeat within its share of `seconds`;
    a stage or variant the budget leaves no time for is recorded as not measured."""
    ds, graph = capped.dataset, capped.graph
    nondeterministic = bool(lint.deterministic_stages(graph))
    count = 3 + int(nondeterministic) + (0 if served else len(graph.measurable()) + 2)
    limit = budget.per_probe(seconds, count, d.repeats)
    until = time.monotonic() + seconds  # this phase's deadline
    # With pipeline.service the stages run on the workers: only the client's rate is timed.
    stage_probes = [] if served else _stage_probes(graph, batch, d, errors, limit)
    # The three rates every verdict needs run first in each round, whatever the time.
    probes = [
        budget.watch(dataset_probe("pipeline", ds, d, time_limit=limit), required=True),
        budget.watch(compute_probe("compute limit", target, train_ds, d, limit), required=True),
        budget.watch(train_probe("training", target, train_ds, d, limit), required=True),
    ]
    optional = [p for _, p in stage_probes if p is not None]
    optional += [] if served else rewrite_probes(graph, ds, d, errors, limit)
    if nondeterministic:
        nd = set_deterministic(graph, ds, False)
        optional.append(dataset_probe("deterministic=False", nd, d, time_limit=limit))
    probes += [_guarded(budget.watch(p, until=until), errors) for p in optional]
    return probes, stage_probes


def diagnose(
    cfg: Any,
    *,
    dataset: Any = None,
    tick: Tick | None = None,
    compute_variants: bool = True,
    budget: Budget | None = None,
) -> Diagnosis:
    """Measures the run file's training pipeline and model and concludes.

    `dataset` replaces the run file's pipeline (the doctor works on any tf.data.Dataset);
    `tick(label)` is called after each timed repeat (progress); `budget` bounds the time
    (DOCTOR_SECONDS by default). A shuffle buffer or cache beyond the RAM budget is never
    filled: a capped copy of the pipeline is timed (bounded.py).
    """
    tick = tick or _no_tick
    budget = budget or Budget(DOCTOR_SECONDS)
    d = cfg.doctor
    original = dataset if dataset is not None else make_input_dataset(cfg, training=True)
    # The static lint first: nothing runs before the graph has been read and bounded.
    graph = lint.read_graph(original)
    capped = bounded(original, graph, ram_budget_bytes(cfg))
    ds = capped.dataset
    batch = real_batch(ds)  # what the pipeline yields, whatever batch_size says
    errors: dict[str, Exception] = {}
    # The train step pulls inside the graph: a finite pipeline must not run dry mid-call.
    train_ds = repeat_if_finite(ds)
    target = build_target(cfg, ds.element_spec, batch, sample=first_of(ds))
    # The what-ifs get a quarter of the time when there are any.
    share = 0.75 if compute_variants and d.what_ifs else 0.9
    seconds = budget.left() * share
    served = dataset is None and cfg.pipeline.service.on
    probes, stage_probes = _main_probes(
        capped, target, train_ds, batch, d, errors, budget, seconds, served
    )
    measured = _measure(probes, d, tick, seconds)
    pipeline, compute, training = (
        measured["pipeline"],
        measured["compute limit"],
        measured["training"],
    )
    stages = _stage_timings(stage_probes, measured, errors)
    slower = confirmed_slower(
        slower_rewrites(pipeline, measured, errors),
        probes,
        errors,
        lambda again: _measure(again, d, tick, budget.left() * 0.25, at_least=2),
    )
    verdict = verdict_for(training.input_bound_fraction)
    what_ifs = _what_if_probes(
        cfg,
        graph=capped.graph,
        train_ds=train_ds,
        batch=batch,
        precision=target.precision,
        verdict=verdict,
        own_pipeline=dataset is None,
        compute_variants=compute_variants,
        errors=errors,
        limit=budget.per_probe(budget.left(), 3, d.repeats),
    )
    watched = [_guarded(budget.watch(p), errors) for p in what_ifs]
    measured_ifs = _measure(watched, d, tick, budget.left()) if watched else {}
    variants = {n: m.examples_per_s.median for n, m in measured_ifs.items() if n not in errors}
    notes = [_note(n, exc) for n, exc in errors.items() if not n.startswith("stage ")]
    notes += capped.notes
    if served:
        notes.append(SERVICE_NOTE)
    shuffle_bytes = {i: n for i, n in capped.bytes_in.items() if graph.stages[i].kind == "shuffle"}
    evidence = Evidence(
        graph=graph,
        pipeline=pipeline.examples_per_s.median,
        compute=compute.examples_per_s.median,
        training=training.examples_per_s.median,
        input_bound_fraction=training.input_bound_fraction,
        compute_batch=compute.examples_per_batch,
        stages=stages,
        variants=variants,
        budget=ram_budget_bytes(cfg),
        shuffle_bytes=shuffle_bytes,
        cache_candidate=_cache_candidate(capped.graph),
        nondeterministic_rate=(
            None
            if "deterministic=False" not in measured or "deterministic=False" in errors
            else measured["deterministic=False"].examples_per_s.median
        ),
        source=user_source(cfg) if dataset is None else None,  # file:line for the findings
        pipeline_cpu=pipeline.cpu_us_per_example.median * 1e-6,
        compute_cpu=compute.cpu_us_per_example.median * 1e-6,
        accelerator=on_accelerator(),
        rewritten=rewritten_costs(measured, errors),
        slower=slower,
    )
    findings = cache_findings(capped, evidence.budget) + run_rules(evidence)
    if verdict == "not input-bound":
        findings = [f for f in findings if f.kind != "input"]
        notes.append("not input-bound: the model, not the input, sets the pace")
    # A generator's finding gets the API call that replaces it and its gain on a sample.
    findings = with_generator_sample(findings, graph)
    costly = [s for s in stages if s.us_per_example is not None]
    slowest = max(costly, key=lambda s: s.us_per_example).label if costly else None
    source = cfg.data.pipeline or (cfg.workload and f"workload {cfg.workload}")
    return Diagnosis(
        source=source or cfg.source or "run file",
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
        costs=evidence.costs,
    )
