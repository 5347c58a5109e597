"""One trial of `tfperf doctor --fix` and what the trials add up to: a candidate change
timed against the best pipeline so far with the real train step, in paired, interleaved
repeats (`tfperf.measure.side_by_side`), and kept only when `compare()` calls it faster;
the optimized pipeline's final check against the original. Both fix paths (the run file's,
entry.py; any dataset's, dataset.py) run their candidates through here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tfperf.config import DoctorConfig, RunConfig
from tfperf.doctor.fix.runfile import apply_changes, describe_changes
from tfperf.doctor.probes.budget import (
    FIX_CLOCK,
    MIN_TRIAL_SECONDS,
    NOT_MEASURED,
    OutOfTime,
    first_within,
)
from tfperf.doctor.probes.target import (
    StepTarget,
    build_target,
    dataset_probe,
    fixed_steps_per_call,
    train_probe,
)
from tfperf.doctor.rewrites.cache import filled_repeat
from tfperf.measure import (
    SECOND_LOOK_PAIRS,
    Comparison,
    Measurement,
    Probe,
    compare,
    gain_but_one,
    pairs_against,
    promising,
    side_by_side,
)
from tfperf.train.run_input import first_of
from tfperf.util.format import paired_ratio, rate_figure

if TYPE_CHECKING:
    import tensorflow as tf

TRIAL_ELEMENT = "a trial's first element"  # its pull's name in Budget.abandoned
# A change must make training this much faster, in every pair of repeats (noise margin).
MIN_GAIN = 0.05
NOT_SLOWER = 0.97  # no pair of a change kept on a second look or confirmation below this
Tick = Callable[[str], None]


@dataclass
class FixTrial:
    """One candidate change: its training examples/s against the best so far, paired."""

    name: str
    change: str
    examples_per_s: float | None  # the candidate's median (None: it did not run)
    kept: bool
    reason: str = ""
    ratio: float | None = None  # measured: candidate / best so far, median paired ratio
    low: float | None = None  # their spread
    high: float | None = None
    predicted: float | None = None  # the gain the diagnosis expected (its findings' model)
    findings: list[str] = field(default_factory=list)  # codes of the findings it acts on
    # The best so far's median in the same paired repeats: what `ratio` compares against
    # (each trial times it afresh; the first row is the final check's original).
    baseline: float | None = None
    # The repeats' min-max of the candidate's and the best so far's rates.
    examples_per_s_range: tuple[float, float] | None = None
    baseline_range: tuple[float, float] | None = None
    dropped: bool = False  # faster in its trial, dropped by the final check

    @property
    def status(self) -> str:
        """'kept', 'dropped' (faster in its trial, not in the final check) or 'not kept'."""
        return "kept" if self.kept else ("dropped" if self.dropped else "not kept")

    def row(self) -> dict[str, str]:
        """The trial's figures as every output shows them (CLI, --json, HTML, YAML header)."""
        rate = rate_text(self.examples_per_s, self.examples_per_s_range)
        if self.examples_per_s is not None and self.baseline is not None:
            rate += f" vs {rate_text(self.baseline, self.baseline_range)}"
        return {
            "change": self.change,
            "examples_per_s_text": rate,
            "predicted_text": "-" if self.predicted is None else f"~{self.predicted:.2f}x",
            "ratio_text": paired_ratio(self.ratio, self.low, self.high),
            "status": self.status,
            "note": self.reason,
        }


def rate_text(median: float | None, span: tuple[float, float] | None) -> str:
    """'1,234 (1,100-1,300)': a median examples/s with its repeats' min-max."""
    return "-" if median is None else rate_figure(median, span)


def _span(m: Measurement) -> tuple[float, float]:
    return (m.examples_per_s.min, m.examples_per_s.max)


@dataclass
class FixResult:
    """Before/after of --fix: each candidate tried, and what was written."""

    before: float
    after: float
    trials: list[FixTrial]
    written: list[str]
    run_file_changes: dict[str, Any] = field(default_factory=dict)
    pipeline_changes: list[str] = field(default_factory=list)
    # The fixed dataset (other datasets), for callers and tests.
    dataset: tf.data.Dataset | None = None
    check: Comparison | None = None  # the optimized pipeline against the original, paired
    code_edits: list[str] = field(default_factory=list)  # each kept rewrite as a code edit
    predicted: float | None = None  # the cost model's gain for the kept changes together
    # Findings not tried because they change the results (doctor.allow), one line each.
    withheld: list[str] = field(default_factory=list)
    # For a model.fit user (tfperf.optimize): the measured compute winners as the keyword
    # arguments to pass to model.compile, e.g. {"jit_compile": True}.
    compile_kwargs: dict[str, Any] = field(default_factory=dict)
    # Where `before` was measured (FINAL_CHECK, ALONE or DIAGNOSIS) and its repeats' min-max.
    before_source: str = ""
    before_range: tuple[float, float] | None = None
    # The optimized pipeline in the final check (kept or not) and its min-max.
    optimized: float | None = None
    optimized_range: tuple[float, float] | None = None

    @property
    def before_label(self) -> str:
        return self.before_source or FINAL_CHECK

    @property
    def headline(self) -> str:
        """One line every output shows: the final check's two rates with their spreads and
        its paired ratio, and what was kept; said as a different measurement when the
        rate comes from the diagnosis."""
        before = rate_text(self.before, self.before_range)
        c = self.check
        kept_anyway = [t.change for t in self.trials if t.kept]
        if c is None:
            text = f"{self.before_label}, {before} examples/s; no change timed as kept"
        else:
            opt = rate_text(self.optimized, self.optimized_range)
            ratio = paired_ratio(c.ratio, c.low, c.high)
            text = f"final check: original {before} vs optimized {opt} examples/s, {ratio}"
            if not self.confirmed:
                text += ": not faster, no speed change kept"
            elif not c.faster:
                floor = (
                    "" if len(c.ratios) >= SECOND_LOOK_PAIRS else f", none below {NOT_SLOWER:.2f}x"
                )
                won = len(c.ratios) - pairs_against(c)
                text += (
                    f": faster in {won} of {len(c.ratios)} pairs{floor}: confirms the trials' gains"
                )
        if kept_anyway and not self.confirmed:
            text += f"; kept without a speed gain: {', '.join(kept_anyway)}"
        if self.predicted is not None:
            text += f"; predicted ~{self.predicted:.2f}x"
        return "training: " + text

    def rows(self) -> list[dict[str, str]]:
        """The before row and each trial's, as every output shows them."""
        first = {
            "change": self.before_label,
            "examples_per_s_text": rate_text(self.before, self.before_range),
            "predicted_text": "",
            "ratio_text": "",
            "status": "",
            "note": "",
        }
        return [first] + [t.row() for t in self.trials]

    @property
    def confirmed(self) -> bool:
        """The final check kept the trials' changes (see `confirms`)."""
        return self.check is not None and confirms(self.check)

    @property
    def speedup(self) -> float:
        return self.check.ratio if self.check is not None and self.confirmed else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "before_examples_per_s": round(self.before, 1),
            "before_range": _rounded(self.before_range),
            "before_source": self.before_label,
            "after_examples_per_s": round(self.after, 1),
            "optimized_examples_per_s": _rounded(self.optimized),
            "optimized_range": _rounded(self.optimized_range),
            "headline": self.headline,
            "rows": self.rows(),
            "speedup": round(self.speedup, 3),
            "predicted_speedup": self.predicted,
            "check": self.check.to_dict() if self.check is not None else None,
            "trials": [asdict(t) for t in self.trials],
            "run_file_changes": self.run_file_changes,
            "pipeline_changes": self.pipeline_changes,
            "code_edits": self.code_edits,
            "written": self.written,
            "withheld": self.withheld,
            "compile_kwargs": self.compile_kwargs,
        }

    def to_html(self, path: str | Path) -> Path:
        """Writes the trials (kept or not, paired ratio and range, predicted gain) as one
        self-contained HTML file. Returns the path."""
        from tfperf.runreport.page import write_doctor_report

        return write_doctor_report(path, fix=self.to_dict())


# Where the first row's rate comes from: the three measurements it can be.
FINAL_CHECK = "before: the original in the final check"
ALONE = "before: the original timed alone (nothing to check)"
DIAGNOSIS = "before: training (c) of the diagnosis (the final check was not measured)"


def _rounded(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, tuple):
        return [round(v, 1) for v in value]
    return round(value, 1)


# ---- timing a candidate against the current pipeline -------------------------------------
# The train steps built for the --fix in progress, by what they depend on: every trial
# times two pipelines on the same model, and a target per probe traced the same step again
# each time (~0.15 s of CPU for a tiny model, seconds for a large one).
_TARGETS: ContextVar[dict[tuple[str, ...], StepTarget] | None] = ContextVar(
    "tfperf_fix_targets", default=None
)


@contextmanager
def shared_targets() -> Iterator[None]:
    """Within it, trial_probe builds one target per model and batch spec (the outermost
    call owns the cache; a nested one shares it)."""
    if _TARGETS.get() is not None:
        yield
        return
    token = _TARGETS.set({})
    try:
        yield
    finally:
        _TARGETS.reset(token)


def _target(cfg: RunConfig, ds: tf.data.Dataset, batch: int) -> StepTarget:
    """The target for training `cfg`'s model on `ds`: built once per model, train settings
    and batch spec within shared_targets (a run-file trial's pipeline.* changes leave the
    model as it is), else built afresh."""
    cache = _TARGETS.get()
    key = (
        cfg.model_dump_json(exclude={"pipeline", "doctor", "source"}),
        str(cfg.pipeline.batch_size),
        repr(ds.element_spec),
        str(batch),
    )
    if cache is not None and key in cache:
        return cache[key]
    clock = FIX_CLOCK.get()
    # Under a budget the real batch is pulled within it: one slower is abandoned, not awaited.
    sample = first_of(ds) if clock is None else first_within(ds, clock.budget, TRIAL_ELEMENT)
    target = build_target(cfg, ds.element_spec, batch, sample=sample)
    if cache is not None:
        cache[key] = target
    return target


def trial_probe(name: str, cfg: RunConfig, ds: tf.data.Dataset, batch: int) -> Probe:
    """Training on `ds` with `cfg`'s model, precision and XLA setting, at the run's own
    steps per call when it fixes them (else doctor.steps)."""
    ds = filled_repeat(ds)  # the epochs after the first, as a cache's trial says it times
    clock = FIX_CLOCK.get()
    limit = clock.limit if clock else None
    if cfg.doctor.target is not None:
        # The accelerator the target stands for will not share this host's cores: what
        # counts is the pipeline's own rate.
        return dataset_probe(name, ds, cfg.doctor, time_limit=limit)
    target = _target(cfg, ds, batch)
    return train_probe(name, target, ds, cfg.doctor, limit, fixed_steps_per_call(cfg))


def _pair(
    current: Probe, candidate: Probe, d: DoctorConfig, tick: Tick, seconds: float | None = None
) -> tuple[Measurement, Measurement, Comparison]:
    """Both side by side (no new round after `seconds`): their measurements and how the
    candidate compares."""
    start = time.monotonic()
    clock = FIX_CLOCK.get()
    if clock is not None:  # shown on the progress display, kept for Ctrl-C
        current = clock.budget.watch(current, required=True)
        candidate = clock.budget.watch(candidate, required=True)
    # One pair never decides (compare), so at least two repeats whatever doctor.repeats says.
    m = side_by_side(
        [current, candidate],
        repeats=max(2, d.repeats),
        on_run=lambda name, _: tick(name),
        time_limit=seconds,
        min_repeats=2,
    )
    a, b = m[current.name], m[candidate.name]
    c = compare(a, b, min_gain=MIN_GAIN)
    # A longer look: a median gain the first pairs do not settle (a loaded host's slow
    # moment hit one side, or a bursty pipeline's windows caught few of its bursts) gets
    # more pairs, up to LONG_LOOK_PAIRS, within the trial's time.
    while promising(c, MIN_GAIN) and len(c.ratios) < LONG_LOOK_PAIRS and not second_look(c).faster:
        left = None if seconds is None else seconds - (time.monotonic() - start)
        if left is not None and left <= 0:
            break
        more = side_by_side([current, candidate], repeats=1, on_run=lambda n, _: tick(n))
        a.runs.extend(more[current.name].runs)
        b.runs.extend(more[candidate.name].runs)
        c = compare(a, b, min_gain=MIN_GAIN)
    return a, b, second_look(c)


# The most pairs a longer look takes; a second look judges from SECOND_LOOK_PAIRS (all but
# one above 1, with a median gain on top: measure.gain_but_one).
LONG_LOOK_PAIRS = 7


def _gain_but_one(c: Comparison, pairs: int) -> bool:
    """At least `pairs` pairs, all but one above 1 and a median gain of MIN_GAIN: the rule of
    a longer look and of the final check's confirmation. The one pair against may be an
    outlier of the host's load when there are SECOND_LOOK_PAIRS pairs or more (beside two
    CPU hogs a baseline's repeat once ran 2x its median: 0.46x against 1.22x); among fewer
    it must be a near tie (none below NOT_SLOWER)."""
    if not gain_but_one(c, MIN_GAIN, pairs):
        return False
    return len(c.ratios) >= SECOND_LOOK_PAIRS or c.low >= NOT_SLOWER


def second_look(c: Comparison) -> Comparison:
    """`c`, called faster when it is `_gain_but_one` over SECOND_LOOK_PAIRS pairs or more;
    as it was otherwise."""
    if c.verdict == "same" and _gain_but_one(c, SECOND_LOOK_PAIRS):
        return Comparison(c.ratios, "faster")
    return c


def cause(exc: Exception) -> str:
    """The line of an error that says what went wrong: TensorFlow's runtime errors start
    with "Graph execution error:" and a Python traceback of where the op was defined."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    noise = ("[[", "File ", "<", "Graph execution error", "Detected at node", "defined at")
    said = [ln for ln in lines if not ln.startswith(noise)]
    return said[-1] if said else (lines[0] if lines else "")


class Skipped(Exception):
    """A candidate that is not tried: not applicable, or it changes the examples."""


Candidate = TypeVar("Candidate")  # what a trial tries: a dataset, or a run file


def run_trial(
    name: str,
    change: str,
    build: Callable[[], tuple[Candidate, Probe, Probe]],
    d: DoctorConfig,
    tick: Tick,
    trials: list[FixTrial],
) -> Candidate | None:
    """One trial, recorded in `trials`: `build()` gives the candidate and the probes of the
    current pipeline and of the candidate, which run side by side. Returns the candidate
    when it is faster, else None (a candidate that fails is reported, not kept)."""
    clock = FIX_CLOCK.get()
    seconds = clock.next_trial() if clock is not None else None
    if clock is not None and seconds is None:
        trials.append(FixTrial(name, change, None, False, NOT_MEASURED))
        return None
    try:
        cand, current, candidate = build()
        base, m, c = _pair(current, candidate, d, tick, seconds)
    except Skipped as why:
        trials.append(FixTrial(name, change, None, False, str(why)))
        return None
    except Exception as exc:  # noqa: BLE001 - e.g. a map that cannot take a batch
        failed = f"{type(exc).__name__}: {cause(exc)[:160]}"
        trials.append(FixTrial(name, change, None, False, failed))
        return None
    reason = {"faster": "faster", "slower": "slower", "same": "within the noise"}[c.verdict]
    if c.faster and pairs_against(c):  # called faster on a second look
        reason += f" in {len(c.ratios) - pairs_against(c)} of {len(c.ratios)} pairs"
    # A rewrite may say what it left undone and why (vectorize: maps pfor cannot convert).
    note = getattr(cand, "doctor_note", "")
    reason += f"; {note}" if note else ""
    median = m.examples_per_s.median
    trial = FixTrial(name, change, median, c.faster, reason, c.ratio, c.low, c.high)
    trial.baseline = base.examples_per_s.median
    trial.examples_per_s_range, trial.baseline_range = _span(m), _span(base)
    trials.append(trial)
    return cand if c.faster else None


@dataclass
class Outcome:
    """Original against optimized, side by side: the numbers FixResult reports."""

    before: float
    after: float
    check: Comparison | None
    keep: bool
    source: str = FINAL_CHECK  # which measurement `before` is
    before_range: tuple[float, float] | None = None
    optimized: float | None = None  # the optimized pipeline's rate in the check
    optimized_range: tuple[float, float] | None = None

    def into(self, result: FixResult) -> FixResult:
        """`result` with the check's figures and where they come from."""
        result.before_source, result.before_range = self.source, self.before_range
        result.optimized, result.optimized_range = self.optimized, self.optimized_range
        return result


def confirms(check: Comparison) -> bool:
    """Whether the final check keeps the kept trials' changes: faster beyond the noise, or
    `_gain_but_one` over its three pairs (the trials' own repeats carry the rest of the
    evidence: beside two CPU hogs one pair of three at 0.99x had dropped a 1.50x trial's
    change, 1.15x paired, 0.99-1.52)."""
    return check.faster or _gain_but_one(check, 3)


def final_check(
    original: Callable[[str], Probe],
    optimized: Callable[[str], Probe] | None,
    d: DoctorConfig,
    tick: Tick,
    trials: list[FixTrial],
    known: float = 0.0,
) -> Outcome:
    """The optimized pipeline against the original (`optimized` None: nothing was kept, the
    original is timed alone). When it is not faster, the kept trials are marked dropped.
    A repeat abandoned at the budget's end (OutOfTime) keeps nothing and reports `known`
    (the diagnosis's rate) as both rates."""
    clock = FIX_CLOCK.get()
    if optimized is None:
        # Only the number to report: within what is left of the budget (one repeat at least).
        left = clock.budget.left() if clock is not None else None
        on_run = lambda n, _: tick(n)  # noqa: E731
        try:
            # Building the probe pulls a first element (within the budget) too.
            probe = original("original")
            probe = clock.budget.watch(probe, required=True) if clock is not None else probe
            alone = side_by_side([probe], repeats=d.repeats, on_run=on_run, time_limit=left)
        except OutOfTime:
            return Outcome(known, known, None, False, DIAGNOSIS)
        m = alone[probe.name]
        rate = m.examples_per_s.median
        return Outcome(rate, rate, None, False, ALONE, _span(m))
    # The check always runs: without it nothing is kept (never slower than the original).
    seconds = max(MIN_TRIAL_SECONDS, clock.budget.left()) if clock is not None else None
    try:
        a, b, check = _pair(original("original"), optimized("optimized"), d, tick, seconds)
    except OutOfTime as cut:
        _drop(trials, f"the final check was not measured ({cut})")
        return Outcome(known, known, None, False, DIAGNOSIS)
    before, after = a.examples_per_s.median, b.examples_per_s.median
    if confirms(check):
        return Outcome(before, after, check, True, FINAL_CHECK, _span(a), after, _span(b))
    ratio = paired_ratio(check.ratio, check.low, check.high)
    _drop(trials, f"the final check found no gain (together {ratio} of the original)")
    return Outcome(before, before, check, False, FINAL_CHECK, _span(a), after, _span(b))


def _drop(trials: list[FixTrial], why: str) -> None:
    """Each kept trial marked dropped: its row says it was faster in its own trial."""
    for t in trials:
        if t.kept:
            t.kept, t.dropped = False, True
            # "faster; a note" -> "faster in its trial; a note; dropped: why".
            t.reason = t.reason.replace("faster", "faster in its trial", 1) + f"; dropped: {why}"


def try_changes(
    cands: list[tuple[str, dict[str, Any]]],
    cfg: RunConfig,
    probe: Callable[[RunConfig, str], Probe],
    tick: Tick,
    trials: list[FixTrial],
) -> tuple[RunConfig, dict[str, Any]]:
    """Run-file changes tried in turn on top of those kept, each against the best run file
    so far (`probe(run file, name)` times training with it): the best and what it changed."""
    best, kept = cfg, {}
    for name, changes in cands:

        def build(
            name: str = name, changes: dict[str, Any] = changes, best: RunConfig = best
        ) -> tuple[RunConfig, Probe, Probe]:
            cand = apply_changes(best, changes)
            return cand, probe(best, "best so far"), probe(cand, name)

        better = run_trial(name, describe_changes(changes), build, cfg.doctor, tick, trials)
        if better is not None:
            best = better
            kept.update(changes)
    return best, kept
