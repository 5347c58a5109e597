"""The gain the diagnosis predicts for each `--fix` trial and for the whole fix: the cost
model (evidence/cost_model.py) run with the findings whose changes the trials make
(PREDICTED_BY: each rule's rewrites, rules/), printed beside the measured gain."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from tfperf.doctor.evidence.findings import Diagnosis, Finding
from tfperf.doctor.fix.trials import FixTrial
from tfperf.doctor.rules import PREDICTED_BY
from tfperf.doctor.rules.per_example import BATCH_FIRST, VECTORIZE


# A trial expects the gain of the findings whose change it makes: those of the rules that list
# its rewrite (PREDICTED_BY, from the registry); a faster precision's trial is named
# "precision POLICY" (runfile.py).
def _codes(trial: FixTrial, diag: Diagnosis) -> tuple[str, ...]:
    if trial.name.startswith("precision "):
        return ("precision",)
    codes = PREDICTED_BY.get(trial.name, ())
    found = {f.code for f in diag.findings}
    if trial.name == VECTORIZE.label and not found & set(codes):
        # No map could run on batches: vectorize's fallback makes them parallel.
        return ("sequential_map",)
    return codes


# The stages a map may pass on its way to the batch, by trial: batch_before_map moves only
# the map right before a batch; vectorize also moves maps across shuffles and prefetches.
MOVES_ACROSS = {
    BATCH_FIRST.label: frozenset(),
    VECTORIZE.label: frozenset({"map", "shuffle", "prefetch"}),
}


# Findings bound to a stage that must move after the batch for their change to apply: those
# whose change is vectorizing (per-example parse and map).
STAGE_BOUND = frozenset(PREDICTED_BY[VECTORIZE.label])


def _moved(diag: Diagnosis, trial: str, codes: set[str]) -> set[int] | None:
    """Indices of the stages `trial` moves after the batch (None: all of them, e.g. the run
    file's batched parse). A map followed by a filter, say, stays per-example: its finding
    is not this trial's."""
    if not codes & STAGE_BOUND:
        return set()
    across = MOVES_ACROSS.get(trial)
    if across is None:
        return None
    out = set()
    stages = sorted(diag.stages, key=lambda s: s.index)
    for f in diag.findings:
        if f.code not in codes or f.stage_index is None:
            continue
        after = [s.kind for s in stages if s.index > f.stage_index]
        # No batch stage timed after it (e.g. not measurable): the finding counts.
        to_batch = after[: after.index("batch")] if "batch" in after else []
        if set(to_batch) <= across:
            out.add(f.stage_index)
    return out


def _savings(diag: Diagnosis, found: list[Finding]) -> tuple[float, float]:
    """Wall and CPU seconds per example the findings' changes save together. Changes of one
    stage compound (a batched parse, then what is left of it in parallel) rather than add."""
    costs = {s.index: (s.us_per_example or 0.0) * 1e-6 for s in diag.stages}
    groups: dict[Any, list[Finding]] = defaultdict(list)
    for f in found:  # a cache saves a whole prefix: its own group
        groups[f.stage_index if f.code != "no_cache" else (f.code,)].append(f)
    wall = cpu = 0.0
    cores = diag.costs.pipeline_cores if diag.costs is not None else 1.0
    for key, fs in groups.items():
        cost = costs.get(key, 0.0) if isinstance(key, int) else 0.0
        if len(fs) == 1 or cost <= 0:
            wall += sum(f.saves_wall or 0.0 for f in fs)
            cpu += sum(f.saves_cpu or 0.0 for f in fs)
            continue
        # A finding's savings were timed on its rewritten pipeline; the stage's cost, from
        # prefix differences, is noisier: the stage costs at least what one change saves.
        cost = max(cost, *(f.saves_wall or 0.0 for f in fs))
        left = [1.0 - min(1.0, (f.saves_wall or 0.0) / cost) for f in fs]
        wall += cost * (1.0 - math.prod(left))
        cpu_cost = max(cost * cores, *(f.saves_cpu or 0.0 for f in fs))
        # A parallel map saves wall time, not CPU: each change's own CPU share compounds.
        cheaper = [1.0 - min(1.0, f.saves_cpu / cpu_cost) for f in fs if f.saves_cpu]
        cpu += cpu_cost * (1.0 - math.prod(cheaper)) if cheaper else 0.0
    return wall, cpu


def training_after(
    diag: Diagnosis, codes: set[str], stages: set[int] | None = None
) -> float | None:
    """Training examples/s the cost model expects once the changes of the findings with
    these codes are all made (None without measured costs): their pipeline savings add up,
    the best compute limit among them counts, and the measured training rate sets the scale
    (its share of the model's overlapped rate stays, unless prefetch makes them overlap)."""
    costs = diag.costs
    if costs is None:
        return None
    found = [f for f in diag.findings if f.code in codes]
    if stages is not None:  # of the stage-bound findings, only those of these stages
        found = [f for f in found if f.code not in STAGE_BOUND or f.stage_index in stages]
    wall, cpu = _savings(diag, found)
    after = costs.pipeline_changed(costs.pipeline_without(wall), costs.pipeline_cpu - cpu)
    computes = [f.new_compute for f in found if f.new_compute]
    if computes:
        after = after.compute_changed(max(computes))
    measured = diag.training.examples_per_s.median
    overlap = measured / costs.training()
    if "no_prefetch" in codes:
        overlap = max(overlap, 1.0)
    return after.training() * overlap


# Findings whose change the cost model has no term for (how the step is called, who gets
# the cores, how many devices): a trial of theirs predicts their own measured gain.
OUTSIDE_COST_MODEL = frozenset({"steps_per_call", "input_threads", "idle_devices"})


def predict(trials: list[FixTrial], diag: Diagnosis) -> float | None:
    """Sets each trial's predicted gain over the best pipeline so far (the cost model with
    the findings of the changes kept before it, with and without its own), and returns the
    gain expected of all kept changes over the original (None: none predicted, e.g. only
    the tuned pipeline was kept)."""
    kept: set[str] = set()
    kept_moved: set[int] | None = set()  # stages the kept changes moved after the batch
    for t in trials:
        codes = set(_codes(t, diag))
        t.findings = [f.code for f in diag.findings if f.code in codes]
        if not t.findings:
            t.predicted = None
            continue
        moved = _moved(diag, t.name, codes)
        with_t = None if moved is None or kept_moved is None else kept_moved | moved
        before = training_after(diag, kept, kept_moved)
        after = training_after(diag, kept | codes, with_t)
        if set(t.findings) <= OUTSIDE_COST_MODEL:  # their own measured gain says it
            before = after = None
        if before and after:
            t.predicted = round(after / before, 3)
        else:  # no measured costs: the findings' own expectation over the original
            gains = [f.expected_speedup for f in diag.findings if f.code in codes]
            t.predicted = round(max(g for g in gains if g), 3) if any(gains) else None
        if t.kept:
            kept, kept_moved = kept | codes, with_t
    base, whole = training_after(diag, set()), training_after(diag, kept, kept_moved)
    return round(whole / base, 3) if kept and base and whole else None
