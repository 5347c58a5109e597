"""`tfperf doctor --fix` on any tf.data.Dataset: the graph rewrites offered as candidates
(candidates.py), each tried on top of those kept (trials.py) and kept only if it is
measurably faster and one epoch still yields the same examples; and `replay`, the kept
rewrites applied again by name (`tfperf.apply_rewrites`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tfperf.config import RunConfig
from tfperf.doctor.evidence.findings import Diagnosis
from tfperf.doctor.fix.candidates import DatasetRewrite, dataset_candidates
from tfperf.doctor.fix.predicted import predict
from tfperf.doctor.fix.runfile import NO_INPUT_TRIALS, run_file_candidates
from tfperf.doctor.fix.trials import (
    FixResult,
    FixTrial,
    Skipped,
    Tick,
    final_check,
    run_trial,
    shared_targets,
    trial_probe,
    try_changes,
)
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import bounded, cache_budget_bytes, ram_budget_bytes
from tfperf.doctor.probes.budget import (
    CHECK_FLOOR_SECONDS,
    FIX_CLOCK,
    Abandoned,
    Budget,
    run_within,
)
from tfperf.doctor.probes.budget import fix_clock as _clocked
from tfperf.doctor.rewrites.edits import (
    same_examples,
)
from tfperf.doctor.rewrites.io import cap_shuffles
from tfperf.doctor.rewrites.shuffle_early import shuffle_before_maps
from tfperf.doctor.rules.cache import CACHE_PREFIX
from tfperf.doctor.rules.ram import CAP_SHUFFLE
from tfperf.doctor.rules.shuffle_early import SHUFFLE_EARLY
from tfperf.doctor.rules.threads import INPUT_THREADS
from tfperf.errors import UserError
from tfperf.measure import Probe
from tfperf.measure.examples import MAX_COMPARE, ExamplesOutOfTime

if TYPE_CHECKING:
    import tensorflow as tf


@shared_targets()  # one train step per model for all the trials
def fix_dataset(
    cfg: RunConfig,
    diag: Diagnosis,
    ds: tf.data.Dataset,
    *,
    tick: Tick | None = None,
    train_changes: bool = True,
    budget: Budget | None = None,
) -> FixResult:
    """The rewrites of `ds` that measurably speed up training with `cfg`'s model, tried in
    turn, then checked together against `ds`: the result's dataset is `ds` itself when
    nothing helped. `train_changes` also tries the run file's train.* changes (precision)
    on the rewritten pipeline. Writes nothing. `budget` bounds the time (none: unbounded).
    A shuffle buffer or cache beyond the RAM budget is capped first (probes/bounded.py)."""
    if budget is not None and FIX_CLOCK.get() is None:
        token = _clocked(budget, 8, cfg.doctor.repeats)  # about 8 candidates and precision
        try:
            return fix_dataset(cfg, diag, ds, tick=tick, train_changes=train_changes)
        finally:
            FIX_CLOCK.reset(token)
    tick = tick or (lambda label: None)
    d = cfg.doctor
    # A shuffle of decoded examples moves before the decode first (a RAM change, kept once
    # verified, whatever the timing); a buffer still beyond the RAM budget is then cut to it.
    early = _shuffle_early(diag, ds)
    ds = early[0] if early is not None else ds
    ram = ram_budget_bytes(cfg)
    users_ds, caps = cap_shuffles(lint.read_graph(ds), ds, ram)
    # The trials time a copy as the diagnosis did: such a buffer holds MEASURE_BUFFER
    # elements (filled to the budget at every warm-up it would take minutes and GiBs), an
    # in-memory cache beyond the budget is left out.
    capped = bounded(ds, lint.read_graph(ds), ram, cache_budget_bytes(cfg))
    ds = capped.dataset
    graph = lint.read_graph(ds)
    batch = diag.batch_size
    rate = diag.pipeline.examples_per_s.median if diag.pipeline.runs else None
    # The multiset check needs one finite pass without randomness; else it is skipped.
    random = any(s.is_random for s in graph.stages)
    checkable = lint.known_cardinality(ds) is not None and not random
    best_ds = ds
    # What the trials time: best_ds, or it with a cache timed on a sample (rewrites/cache.py
    # FILL_SECONDS), each later rewrite applied to both.
    timed_ds = ds
    trials: list[FixTrial] = []
    changes: list[str] = []
    done = (CAP_SHUFFLE.label, SHUFFLE_EARLY.label)  # RAM changes, decided above
    cands = [c for c in dataset_candidates(graph, ds, diag) if c[0] not in done]
    if not diag.input_trials:  # the model sets the pace: only compute-side rewrites
        cands = [c for c in cands if c[0] == INPUT_THREADS.label]
        skipped = FixTrial("input changes", NO_INPUT_TRIALS, None, False, "not input-bound")
        trials.append(skipped)
    for name, rewrite in cands:

        def build(
            name: str = name,
            rewrite: DatasetRewrite = rewrite,
            best: tf.data.Dataset = best_ds,
            timed: tf.data.Dataset = timed_ds,
        ) -> tuple[tf.data.Dataset, Probe, Probe]:
            cand = rewrite(best, lint.read_graph(best))
            if cand is None:
                raise Skipped("not applicable")
            # A rewrite may bring its own check: a callable (float32's, with a tolerance)
            # replaces the multiset's; a pair (a shuffled source's rewrite: its own part,
            # unshuffled) stands in for it where the whole pipeline cannot be compared.
            # padding=True: a padded_batch pads each batch to its own longest example, so a
            # rewrite that only reorders examples changes their padding, not the examples.
            check = getattr(cand, "doctor_check", None)
            try:
                if callable(check):
                    if not check():
                        raise Skipped("changes the examples beyond float32's precision")
                elif checkable and not sampled_same(ds, cand, rate, batch):
                    raise Skipped("changes the examples")
                elif not checkable and check is not None:
                    old, new = check
                    if not sampled_same(old, new, rate, batch):
                        raise Skipped("changes the examples")
            except (ExamplesOutOfTime, Abandoned) as cut:
                # Never timed unchecked: a rewrite that may change the examples is not kept.
                raise Skipped(f"not verified: {cut}") from None
            timed_cand = getattr(cand, "doctor_timed", cand)
            if timed is not best:
                timed_cand = rewrite(timed, lint.read_graph(timed))
                if timed_cand is None:
                    raise Skipped("not applicable to the pipeline with its cache sampled")
            cand.doctor_timed = timed_cand  # what the later trials time in its place
            current = trial_probe("best so far", cfg, timed, batch)
            return cand, current, trial_probe(name, cfg, timed_cand, batch)

        better = run_trial(name, name, build, d, tick, trials)
        if better is not None:
            best_ds, timed_ds = better, better.doctor_timed
            changes.append(name)
    # Precision is a run-file change that applies to any pipeline (the rewritten one here).
    train_only = [
        (name, ch)
        for name, ch in run_file_candidates(cfg, diag)
        if train_changes and all(k.startswith("train.") for k in ch)
    ]
    on_best = lambda c, n: trial_probe(n, c, timed_ds, batch)  # noqa: E731
    best_cfg, kept = try_changes(train_only, cfg, on_best, tick, trials)
    predicted = predict(trials, diag)
    optimized = None
    if changes or kept:
        optimized = lambda n: trial_probe(n, best_cfg, timed_ds, batch)  # noqa: E731
    original = lambda n: trial_probe(n, cfg, ds, batch)  # noqa: E731
    known = diag.training.examples_per_s.median  # reported if the final check is abandoned
    outcome = final_check(original, optimized, d, tick, trials, known)
    if not outcome.keep:
        best_ds, changes, kept = ds, [], {}
    for note in capped.cache_notes:  # timed without it; the user's code keeps it
        trials.insert(0, FixTrial("cache over budget", note, None, False, "RAM budget"))
    if caps:  # RAM safety, not speed: kept without a trial (the original cannot run)
        sizes = "; ".join(str(c) for c in caps)
        trials.insert(
            0, FixTrial(CAP_SHUFFLE.label, CAP_SHUFFLE.label, None, True, f"RAM budget: {sizes}")
        )
        # The user's pipeline gets the buffer capped to the budget, not the timed copy's.
        best_ds = replay(users_ds, changes, diag, strict=False)
        changes.insert(0, CAP_SHUFFLE.label)
    elif capped.timed_buffers:  # timed with smaller shuffle buffers: the user's keep theirs
        best_ds = replay(users_ds, changes, diag, strict=False)
    if early is not None:
        early[1].reason += _moved_back(best_ds, changes)
        trials.insert(0, early[1])
        changes[:0] = [SHUFFLE_EARLY.label] if early[1].kept else []
    result = FixResult(
        outcome.before,
        outcome.after,
        trials,
        [],
        kept,
        changes,
        best_ds,
        outcome.check,
        predicted=predicted if outcome.keep else None,
    )
    return outcome.into(result)  # where `before` was measured, and the spreads


def _shuffle_early(diag: Diagnosis, ds: tf.data.Dataset) -> tuple[tf.data.Dataset, FixTrial] | None:
    """`ds` with its shuffle moved before the decode, and the trial row saying so, when the
    diagnosis found a buffer of decoded examples. Kept without a multiset check: the maps it
    crosses take one element and give one with no random numbers (lint.maps_before), so each
    pass holds the same examples by construction. A check of the whole pipeline would read
    its random augmentations, repeat or take after the shuffle, and refuse the move."""
    found = next((f for f in diag.findings if f.code == "shuffle_after_decode"), None)
    moved = shuffle_before_maps(lint.read_graph(ds), ds) if found is not None else None
    if found is None or moved is None:
        return None
    name = SHUFFLE_EARLY.label
    why = f"RAM: {found.expected}; the same examples by construction (one-in-one-out maps)"
    return moved, FixTrial(name, name, None, True, why)


def _moved_back(final: tf.data.Dataset, changes: list[str]) -> str:
    """What the shuffle move's row adds when a later kept cache moved the shuffle back after
    the decode: the cache then holds every decoded example, and the shuffle after it holds
    references to them (its row says the RAM), so the move's saving is no longer there."""
    stages = lint.read_graph(final).stages
    cache = next((s.index for s in stages if s.kind == "cache"), None)
    shuffle = next((s.index for s in stages if s.kind == "shuffle"), None)
    if CACHE_PREFIX.label not in changes or cache is None or shuffle is None or shuffle < cache:
        return ""
    return (
        f"; then '{CACHE_PREFIX.label}' (kept) cached the decoded examples and moved the "
        "shuffle after the cache: its row gives the RAM it holds"
    )


RETRIES = 2  # smaller samples tried after a check cut at its deadline


def sample_size(rate: float | None, seconds: float, batch: int) -> int | None:
    """Examples a multiset check compares in `seconds` at `rate` examples/s (the original
    pipeline's): two passes, each building its iterator, so a third of the time each; at
    least one batch, at most MAX_COMPARE. None: no rate, MAX_COMPARE with the deadline."""
    if rate is None or rate <= 0:
        return None
    return int(min(MAX_COMPARE, max(batch, rate * seconds / 3)))


def sampled_same(a: tf.data.Dataset, b: tf.data.Dataset, rate: float | None, batch: int) -> bool:
    """Whether `a` and `b` yield the same multiset of examples on their first N (sized by
    time, see `sample_size`), one pass each. A pass cut at its deadline is retried on a
    smaller sample (a quarter of what it reached; cut before its first element, with twice
    the time) while the budget leaves time;
    ExamplesOutOfTime once it does not; Abandoned when one element outlasts it."""
    clock = FIX_CLOCK.get()
    if clock is None or clock.check_deadline is None:  # no budget: MAX_COMPARE examples
        return same_examples(a, b, padding=True)
    limit, longer = MAX_COMPARE, 0
    for attempt in range(RETRIES + 1):
        until = clock.check_until(retry=attempt > 0, longer=longer)
        if until is None:
            raise ExamplesOutOfTime(0)
        limit = min(limit, sample_size(rate, until - time.monotonic(), batch) or limit)
        # The deadline is read between elements: one element slower than the check's time
        # (and its floor again) is abandoned, not waited for; no smaller sample then helps.
        hard = min(until + CHECK_FLOOR_SECONDS, clock.budget.hard_end) - time.monotonic()

        def same(n: int = limit, u: float = until) -> bool:
            return same_examples(a, b, limit=n, deadline=u, padding=True)

        try:
            return bool(run_within(same, hard, "the multiset check"))
        except ExamplesOutOfTime as cut:
            if attempt == RETRIES:
                raise
            limit = max(1, min(limit, cut.examples) // 4)
            longer += cut.examples == 0  # its first element (the iterator's build) is slow
    raise AssertionError("unreachable")


def replay(
    dataset: tf.data.Dataset, names: list[str], diag: Diagnosis | None, *, strict: bool = True
) -> tf.data.Dataset:
    """`dataset` with the named rewrites applied in order, each on the graph the previous
    one left (names as `--fix` prints them). One that does not apply is a UserError, or
    skipped with strict=False."""
    ds = dataset
    for name in names:
        graph = lint.read_graph(ds)
        known = dict(dataset_candidates(graph, ds, diag, trial=False))
        if name not in known:
            raise UserError(
                f"tfperf.apply_rewrites: unknown rewrite '{name}'; expected one of "
                f"{sorted(known)} (the names `tfperf doctor --fix` prints)"
            )
        why = "not applicable"
        try:
            out = known[name](ds, graph)
        except Exception as exc:  # noqa: BLE001 - a rewrite that cannot be built here
            out, why = None, f"{type(exc).__name__}: {str(exc)[:200]}"
        if out is None and strict:
            raise UserError(
                f"tfperf.apply_rewrites: '{name}' does not apply to this dataset ({why}; its "
                f"stages: {' -> '.join(s.label for s in graph.stages)}); the pipeline "
                "changed since the doctor kept it: run `tfperf doctor --fix` again"
            )
        ds = ds if out is None else out
    return ds
