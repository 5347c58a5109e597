"""The doctor's measurements of one run file's training, side by side in one process on the
shared core `tfperf.measure`: the pipeline alone and each of its stage prefixes, the model
fed one cached batch (the compute limit) and both together with the real train step (input
wait measured in the graph, as the training loop does); then the what-ifs. The rules turn
them into a `Diagnosis`.

Reading the graph is graph/'s job, judging rules/' (on evidence/'s `Evidence`), building
probes probes/target.py's; stages.py makes the stage prefixes' probes, what_ifs.py the
what-ifs', verdict.py draws the verdict from the three rates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tfperf.config import DoctorConfig, RunConfig
from tfperf.doctor.diagnosis.busy_host import busy_host_note, free_cores
from tfperf.doctor.diagnosis.more_rounds import second_look, top_up
from tfperf.doctor.diagnosis.rewritten import (
    confirmed_slower,
    rewrite_probes,
    rewritten_costs,
    slower_rewrites,
)
from tfperf.doctor.diagnosis.stages import (
    cache_candidate,
    remainder,
    slowest_stage,
    stage_probes,
    stage_timings,
)
from tfperf.doctor.diagnosis.verdict import (
    INCONSISTENT,
    NOT_MEASURED,
    REQUIRED,
    boundary_of,
    drawn_without,
    inconsistency,
    input_keeps_up,
    rates_overlap,
    shares_cores,
    timed,
)
from tfperf.doctor.diagnosis.what_if_rows import what_if_rows
from tfperf.doctor.diagnosis.what_ifs import real_batch, what_if_probes
from tfperf.doctor.evidence.evidence import (
    COMPUTE_VARIANTS,
    PAIRED_COMPUTE,
    PAIRED_TRAINING,
    TRAINING_VARIANTS,
    Evidence,
)
from tfperf.doctor.evidence.findings import Diagnosis, Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.graph.user_source import user_source
from tfperf.doctor.probes.bounded import (
    Bounded,
    bounded,
    cache_budget_bytes,
    cache_findings,
    ram_budget_bytes,
)
from tfperf.doctor.probes.budget import DOCTOR_SECONDS, Abandoned, Budget, first_within
from tfperf.doctor.probes.generator_sample import sample_size, with_generator_sample
from tfperf.doctor.probes.target import (
    StepTarget,
    build_target,
    compute_probe,
    dataset_probe,
    devices_used,
    local_accelerators,
    on_accelerator,
    train_probe,
)
from tfperf.doctor.rewrites.edits import set_deterministic
from tfperf.doctor.rules import RULES, ranked_with_ties, tie_factor, tie_statement
from tfperf.inputs.datasets import make_input_dataset
from tfperf.measure import (
    Comparison,
    Measurement,
    Probe,
    Run,
    compare,
    median_spread,
    repeat_if_finite,
    side_by_side,
)
from tfperf.measure.host_load import HostLoad
from tfperf.observe.feed import verdict_for

if TYPE_CHECKING:
    import tensorflow as tf

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
    probes: list[Probe],
    d: DoctorConfig,
    tick: Tick,
    seconds: float | None = None,
    at_least: int = 1,
) -> dict[str, Measurement]:
    """The probes side by side, `d.repeats` rounds interleaved (no new round after
    `seconds`, once `at_least` rounds ran)."""
    on_run = lambda name, _: tick(name)  # noqa: E731
    return side_by_side(
        probes, repeats=d.repeats, on_run=on_run, time_limit=seconds, min_repeats=at_least
    )


def _range(m: Measurement) -> tuple[float, float] | None:
    """The slowest and fastest timed repeat of `m` (examples/s), or None below two."""
    if m.timed_repeats < 2:
        return None
    rate = m.examples_per_s
    return (rate.min, rate.max) if rate.min > 0 else None


def _paired(
    measured: dict[str, Measurement],
    errors: dict[str, Exception],
    reference: str,
    prefixes: tuple[str, ...],
    main: Measurement,
    variants: dict[str, float],
) -> dict[str, Comparison]:
    """Each what-if named by `prefixes` against `reference` (the compute limit or training,
    timed again in the same rounds); its rate in `variants` is restated on the main phase's
    scale (`main` x the paired median ratio), so that a slower or faster spell of the host
    between phases does not count."""
    ref = measured.get(reference)
    variants.pop(reference, None)
    if ref is None or reference in errors or not ref.runs:
        return {}
    out = {}
    for name, m in measured.items():
        if name.startswith(prefixes) and name not in errors and m.runs:
            out[name] = compare(ref, m)
            variants[name] = main.examples_per_s.median * out[name].ratio
    return out


def graph_risks(evidence: Evidence) -> list[Finding]:
    """The RAM risks (a shuffle buffer or cache beyond the budget, read from the graph and
    the element sizes): what a diagnosis without the measured rates still says."""
    return [f for r in RULES if r.kind == "risk" for f in r.detect(evidence)]


def pipeline_first(ranked: list[Finding]) -> list[Finding]:
    """`ranked` with the compute findings after all others, each side in its order: with a
    target the pipeline alone misses, the model's step on this host is not the accelerator
    the target stands for, and only the pipeline's own rate brings training to it."""
    return sorted(ranked, key=lambda f: f.kind == "compute")  # stable: ranks kept within


def not_measured(cfg: RunConfig, graph: lint.DatasetGraph, why: str, budget: Budget) -> Diagnosis:
    """The diagnosis of a pipeline whose first element outlasted the whole budget: every
    rate a row "not measured", the reason in the verdict and the notes, no findings."""
    empty = [Measurement(name) for name in REQUIRED]
    return Diagnosis(
        source=cfg.data.pipeline or cfg.source or "run file",
        model=cfg.model.name or "model",
        batch_size=graph.batch_size or cfg.pipeline.batch_size,
        precision=cfg.train.precision,
        pipeline=empty[0],
        compute=empty[1],
        training=empty[2],
        stages=[],
        slowest_stage=None,
        verdict=f"{NOT_MEASURED} (pipeline, compute limit, training: its first element "
        "outlasted the time budget)",
        findings=[],
        notes=[f"{name}: {why}" for name in REQUIRED]
        + [f"give a larger budget (budget_s, --budget) than {budget.seconds:.0f} s"],
        target=cfg.doctor.target,
    )


def _note(name: str, exc: Exception) -> str:
    return f"{name}: not measured ({type(exc).__name__}: {str(exc)[:160]})"


# ---- the diagnosis -------------------------------------------------------------------------
def _main_probes(
    capped: Bounded,
    target: StepTarget,
    train_ds: tf.data.Dataset,
    batch: int,
    d: DoctorConfig,
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
    per_stage = [] if served else stage_probes(graph, batch, d, errors, limit)
    # The three rates every verdict needs run first in each round, whatever the time.
    probes = [
        budget.watch(dataset_probe("pipeline", ds, d, time_limit=limit), required=True, row=True),
        budget.watch(
            compute_probe("compute limit", target, train_ds, d, limit), required=True, row=True
        ),
        budget.watch(train_probe("training", target, train_ds, d, limit), required=True, row=True),
    ]
    optional = [p for _, p in per_stage if p is not None]
    optional += [] if served else rewrite_probes(graph, ds, d, errors, limit)
    if nondeterministic:
        nd = set_deterministic(graph, ds, False)
        optional.append(dataset_probe("deterministic=False", nd, d, time_limit=limit))
    probes += [_guarded(budget.watch(p, until=until), errors) for p in optional]
    return probes, per_stage


def diagnose(
    cfg: RunConfig,
    *,
    dataset: tf.data.Dataset | None = None,
    tick: Tick | None = None,
    compute_variants: bool = True,
    budget: Budget | None = None,
) -> Diagnosis:
    """Measures the run file's training pipeline and model and concludes.

    `dataset` replaces the run file's pipeline (the doctor works on any tf.data.Dataset);
    `tick(label)` is called after each timed repeat (progress); `budget` bounds the time
    (DOCTOR_SECONDS by default). A shuffle buffer or cache beyond the RAM budget is never
    filled: a capped copy of the pipeline is timed (probes/bounded.py).
    """
    tick = tick or _no_tick
    budget = budget or Budget(DOCTOR_SECONDS)
    d = cfg.doctor
    original = dataset if dataset is not None else make_input_dataset(cfg, training=True)
    # The static lint first: nothing runs before the graph has been read and bounded.
    graph = lint.read_graph(original)
    capped = bounded(original, graph, ram_budget_bytes(cfg), cache_budget_bytes(cfg))
    ds = capped.dataset
    # The first element is pulled once, within the budget: one slower than all of it is a
    # diagnosis that says so, not a hang.
    sample = first_within(ds, budget)
    try:
        batch = real_batch(ds, sample)  # what the pipeline yields, whatever batch_size says
        target = build_target(cfg, ds.element_spec, batch, sample=sample)
    except Abandoned as exc:
        return not_measured(cfg, graph, f"the pipeline's first element: {exc}", budget)
    errors: dict[str, Exception] = {}
    # The train step pulls inside the graph: a finite pipeline must not run dry mid-call.
    train_ds = repeat_if_finite(ds)
    # The what-ifs get a quarter of the time when there are any.
    share = 0.75 if compute_variants and d.what_ifs else 0.9
    seconds = budget.left() * share
    served = dataset is None and cfg.pipeline.service.on
    probes, per_stage = _main_probes(
        capped, target, train_ds, batch, d, errors, budget, seconds, served
    )
    # Other work on the host's cores, sampled after each timed repeat of the three rates.
    load = HostLoad()

    def sampled(label: str) -> None:
        load.sample()
        tick(label)

    measured = _measure(probes, d, sampled, seconds)
    top_up(measured, probes, d, sampled, budget)
    pipeline, compute, training = (
        measured["pipeline"],
        measured["compute limit"],
        measured["training"],
    )
    stages = stage_timings(per_stage, measured, errors)
    free = free_cores(load, training)
    slower = confirmed_slower(
        slower_rewrites(pipeline, measured, errors),
        probes,
        errors,
        lambda again: _measure(again, d, tick, budget.left() * 0.25, at_least=2),
    )
    inconsistent = inconsistency(pipeline, compute, training)
    # No verdict is drawn from a measurement that contradicts itself.
    verdict = INCONSISTENT if inconsistent else verdict_for(training.input_bound_fraction)
    fractions = training.input_bound_fractions
    keeps_up = None if inconsistent else input_keeps_up(fractions, pipeline, compute)
    if keeps_up is not None:
        verdict = "not input-bound"
    # A rate whose first repeat outlasted the budget (a slow element, a loaded host) is a
    # row "not measured", and the verdict says which rate it lacked.
    missing = [n for n in REQUIRED if n in budget.abandoned and not timed(measured[n])]
    if missing:
        verdict = drawn_without(missing, pipeline, compute)
        inconsistent = None
    # A rate abandoned at the budget's end leaves no time: no what-if is built (building
    # one may pull a real batch of the slow pipeline).
    what_ifs = (
        []
        if missing
        else what_if_probes(
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
            target=target,
        )
    )
    watched = [_guarded(budget.watch(p), errors) for p in what_ifs]
    measured_ifs = _measure(watched, d, tick, budget.left()) if watched else {}
    second_look(measured_ifs, watched, errors, tick, budget)
    variants = {n: m.examples_per_s.median for n, m in measured_ifs.items() if n not in errors}
    paired = _paired(measured_ifs, errors, PAIRED_COMPUTE, COMPUTE_VARIANTS, compute, variants)
    paired |= _paired(measured_ifs, errors, PAIRED_TRAINING, TRAINING_VARIANTS, training, variants)
    shown = what_if_rows(measured_ifs, variants, paired, compute, training)
    notes = [f"{n}: {budget.abandoned[n]}" for n in missing]
    notes += [_note(n, exc) for n, exc in errors.items() if not n.startswith("stage ")]
    notes += capped.notes
    if served:
        notes.append(SERVICE_NOTE)
    if load.busy:
        notes.append(busy_host_note(load, free))
    shuffle_bytes = {i: n for i, n in capped.bytes_in.items() if graph.stages[i].kind == "shuffle"}
    close = None if inconsistent or missing else rates_overlap(pipeline, compute)
    evidence = Evidence(
        graph=graph,
        pipeline=pipeline.examples_per_s.median,
        compute=compute.examples_per_s.median,
        training=training.examples_per_s.median,
        input_bound_fraction=training.input_bound_fraction,
        spread=median_spread(measured.values()),
        pipeline_range=_range(pipeline),
        compute_range=_range(compute),
        compute_batch=compute.examples_per_batch,
        stages=stages,
        variants=variants,
        paired=paired,
        budget=ram_budget_bytes(cfg),
        cache_budget=cache_budget_bytes(cfg),
        shuffle_bytes=shuffle_bytes,
        shuffle_early_bytes=capped.early_bytes,
        cache_candidate=cache_candidate(capped.graph),
        nondeterministic_rate=(
            None
            if "deterministic=False" not in measured or "deterministic=False" in errors
            else measured["deterministic=False"].examples_per_s.median
        ),
        source=user_source(cfg) if dataset is None else None,  # file:line for the findings
        users_code=dataset is not None or bool(cfg.data.pipeline),
        pipeline_cpu=pipeline.cpu_us_per_example.median * 1e-6,
        compute_cpu=compute.cpu_us_per_example.median * 1e-6,
        accelerator=on_accelerator(),
        free_cores=free,
        busy_host=load.busy,
        devices=local_accelerators(),
        devices_used=devices_used(cfg),
        steps_per_call=d.steps,
        rewritten=rewritten_costs(measured, errors),
        slower=slower,
    )
    # The rules judge measured rates: none are drawn from a rate that was not measured.
    ranked, ties = ranked_with_ties(evidence) if not missing else (graph_risks(evidence), [])
    if missing:
        notes.append(
            "only the RAM risks read from the graph: the other rules judge the three rates, "
            "and not all were measured"
        )
    on_target = d.target is not None and pipeline.examples_per_s.median < d.target
    if on_target:
        ranked = pipeline_first(ranked)
    findings = cache_findings(capped, evidence.cache_budget) + ranked
    noise = training.examples_per_s.spread
    # Without an accelerator the model's step takes the cores that feed it.
    cores = evidence.cores
    shared = None if evidence.accelerator else shares_cores(pipeline, compute, cores, fractions)
    boundary = None if inconsistent or missing else boundary_of(fractions, close, noise, shared)
    far = keeps_up is not None and not missing
    if far:
        boundary = keeps_up
    # Input advice is dropped only when every repeat says not input-bound (or the pipeline
    # alone is far beyond the model): a verdict near the boundary kept it in one run and
    # dropped it in the next.
    if verdict == "not input-bound" and (boundary is None or far) and not on_target:
        findings = [f for f in findings if f.kind != "input"]
        notes.append("not input-bound: the model, not the input, sets the pace")
    kept = {id(f) for f in findings}
    tie = tie_factor(evidence)
    notes += [tie_statement(run, tie) for run in ties if all(id(f) in kept for f in run)]
    # A generator's finding gets the API call that replaces it and its gain on a sample.
    # Within what the budget has left (5% of it at least): a slow generator took minutes.
    sample_s = max(budget.left(), 0.05 * budget.seconds)
    findings = with_generator_sample(findings, graph, sample_size(d.steps, batch), seconds=sample_s)
    slowest, slowest_labels = slowest_stage(stages)
    source = cfg.data.pipeline or (cfg.workload and f"workload {cfg.workload}")
    return Diagnosis(
        source=source or cfg.source or "run file",
        model=target.name,
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
        variants_shown=shown,
        notes=notes,
        costs=evidence.costs,
        target=d.target,
        slowest_stages=slowest_labels,
        unattributed=remainder(stages, pipeline),
        verdict_range=boundary,
        inconsistent=inconsistent,
        host_load=load.to_dict() | {"free_cores": free} if load.others_per_interval else None,
    )
