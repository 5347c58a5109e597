"""The rule registry: one `Rule` record per rule (its code, the kind of its findings, its
priority, `detect(evidence)`, and the --fix rewrites that make its change), registered in the
module that defines the rule; `run_rules` runs them all on the `Evidence` and ranks the
findings: RAM risks first, then a wrong stage order, then by expected speedup (input and
compute findings together), with gains within the run's noise of each other or whose ranges
over the rates' repeats overlap (gain_ranges) ranked by priority (the more specific cause
first); a change that alters the results (a larger batch) after every change that keeps
them and gains 1.1x or more, input's and model's alike (_tier).

Everything else that names rules is derived from here (rules/__init__.py): RULES, PRIORITY,
ORDER_CODES, PREDICTED_BY (fix/predicted.py) and the code edits by label
(fix/pipeline_file.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding

Detect = Callable[[Evidence], list[Finding]]
UNRANKED = 10**6  # the priority of a finding no registered rule made (last among ties)


@dataclass(frozen=True)
class Rewrite:
    """A change `tfperf doctor --fix` tries for a rule's findings: timed against the best
    pipeline so far and kept only when training is measurably faster. A trial of it expects
    the gain of the findings of the rules that list it (fix/predicted.py)."""

    label: str  # the candidate's name, as --fix prints it and tfperf.apply_rewrites takes it
    # The change as an edit of the user's tf.data code, for a data.pipeline function
    # (fix/pipeline_file.py); None: a change of tfperf's own run file (pipeline.* keys).
    edit: str | None = None
    # The line of the user's function the edit names: a kind fix/pipeline_file.py's _line_of
    # knows ("vectorize", "batch_move", "parallel", "cache", "float32", "reads", "batch",
    # "shuffle", "gather", "source", "csv"), else the function's return.
    at: str = "return"


@dataclass(frozen=True)
class Rule:
    """One rule of the doctor, as the registry knows it."""

    code: str  # the code of its findings (Finding.code)
    kind: str  # the kind of its findings: "risk", "data", "input", "compute", "resume"
    priority: int  # ties in expected gain are broken by it: the lower first
    detect: Detect  # its findings on the evidence (an empty list: nothing to say)
    rewrites: tuple[Rewrite, ...] = ()  # the --fix candidates that make its change
    # About the stages' order (what the model trains on, not speed): ranked right after the
    # RAM risks, before any speed advice.
    order: bool = False
    # The last resort (more hosts): after every change that makes this host's input cheaper.
    last_resort: bool = False
    # Its change alters what the model learns (a larger batch, whose learning rate is tuned
    # again): after the model's changes that keep the results, whatever the gains.
    changes_results: bool = False


_REGISTRY: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Adds `rule` to the registry (its code must be new) and returns it."""
    if rule.code in _REGISTRY:
        raise ValueError(f"the doctor's rule '{rule.code}' is registered twice")
    _REGISTRY[rule.code] = rule
    return rule


def rule(
    code: str,
    kind: str,
    priority: int,
    *,
    rewrites: tuple[Rewrite, ...] = (),
    order: bool = False,
    last_resort: bool = False,
    changes_results: bool = False,
) -> Callable[[Detect], Detect]:
    """A decorator registering the function as the detect of rule `code`:

    @rule("cache_after_shuffle", "data", 45, order=True)
    def rule_cache_after_shuffle(ctx: Evidence) -> list[Finding]: ...
    """

    def add(detect: Detect) -> Detect:
        register(Rule(code, kind, priority, detect, rewrites, order, last_resort, changes_results))
        return detect

    return add


def registered() -> tuple[Rule, ...]:
    """Every rule registered so far, in the order they were."""
    return tuple(_REGISTRY.values())


def run_rules(ctx: Evidence) -> list[Finding]:
    """Every registered rule's findings on `ctx`, ranked."""
    return ranked_with_ties(ctx)[0]


def _detected(ctx: Evidence) -> list[Finding]:
    found: list[Finding] = []
    for r in _REGISTRY.values():
        found.extend(r.detect(ctx))
    if ctx.users_code:
        for f in found:
            f.change = code_only(f.change)
    return found


# "(run file: pipeline.prefetch: auto)", "; run file: pipeline.cache_preprocessed: true)"
_RUN_FILE_HINT = re.compile(r" \(run file: [^()]*\)|; run file: [^()]*(?=\))")


def code_only(change: str) -> str:
    """`change` without its run-file hints: the pipeline.* keys they name shape tfperf's own
    pipeline, not a user's function or dataset (a user set pipeline.prefetch: auto, as
    advised, and the graph had no prefetch)."""
    return _RUN_FILE_HINT.sub("", change)


def gain_ranges(ctx: Evidence, found: list[Finding]) -> None:
    """Sets each speed finding's `expected_range`: its expected gain at `ctx`'s corners (the
    pipeline alone and the compute limit at the opposite ends of their repeats) and at the
    medians, lowest to highest, and says it in `expected` (the text, --json and HTML show
    it). A gain drawn from rates this noisy is known to this range."""
    ends = [_detected(c) for c in ctx.corners()]
    if not ends:  # one repeat, or ranges not known: no range
        return
    for f in found:
        if f.expected_speedup is None:
            continue
        gains = [f.expected_speedup]
        for at_end in ends:
            gains += [
                g.expected_speedup
                for g in at_end
                if g.code == f.code and g.stage_index == f.stage_index and g.expected_speedup
            ]
        f.expected_range = (min(gains), max(gains))
        f.expected += f" ({_span(f.expected_range)} at the ends of the measured repeats)"


def ranked_with_ties(ctx: Evidence) -> tuple[list[Finding], list[list[Finding]]]:
    """Every registered rule's findings on `ctx`, ranked, and the runs of findings whose
    expected gains tied within the noise (TIE, or overlapping gain ranges), each run in its
    priority order."""
    found = _detected(ctx)
    gain_ranges(ctx, found)

    # Input and compute findings rank together by expected gain: the cost model already
    # says which side limits (a change to the other gains ~1x). Ranked apart by the wait
    # fraction, a 1.0x per-example map of a pipeline ten times faster than its model came
    # before the model's own 1.5x changes in one run, after them in the next (its wait read
    # 6-12%, then 2-6%, beside two CPU hogs).
    def group(f: Finding) -> tuple[int, ...]:
        r = _REGISTRY.get(f.code)
        # A wrong stage order changes what the model learns from: it comes right after the
        # RAM risks (which can stop the run) and before any speed advice, since a faster
        # pipeline that feeds the same batches every epoch is still wrong, and moving the
        # shuffle changes what its buffer holds, so speed is better judged after the move.
        wrong_order = r is not None and r.order
        last_resort = r is not None and r.last_resort
        return (f.kind != "risk", not wrong_order, last_resort, _tier(f))

    def priority(f: Finding) -> int:
        r = _REGISTRY.get(f.code)
        return r.priority if r is not None else UNRANKED

    ranked = sorted(found, key=lambda f: (group(f), -(f.expected_speedup or 0.0), priority(f)))
    runs = _tied_runs(ranked, group, priority, tie_factor(ctx))
    flat = [f for run in runs for f in run]
    return flat, [run for run in runs if _timed_tie(run)]


# An expected gain below this is no reason to try a change before one that alters the
# results: a 1.0x finding is kept for what it says, not for its speed.
WORTH = 1.1


def _tier(f: Finding) -> int:
    """A change that keeps the results and gains WORTH or more (0), then one that alters
    what the model learns (1: a larger batch, its learning rate to retune), then the rest
    (2), each tier by gain: beside two CPU hogs jena_window_generator's 4x batch (1.3-1.9x)
    and its pipeline's gather (1.4-1.7x) led in turn, as a small model's XLA (1.1-1.5x)
    and its batch had. A gain whose range (gain_ranges) reaches WORTH is worth it: on the
    cores a busy host left, regression's XLA (timed 1.3x faster every time) read ~1.0x in
    one run of five and its batch led, as XLA ~1.3x had in the other four."""
    if _changes_results(f):
        return 1
    top = f.expected_range[1] if f.expected_range else (f.expected_speedup or 0.0)
    return 0 if top >= WORTH else 2


def _changes_results(f: Finding) -> bool:
    r = _REGISTRY.get(f.code)
    return r is not None and r.changes_results


# Expected gains within this factor of the next larger one are a tie: they are estimates
# from timings on a shared host, and two findings on one stage (a per-example map that also
# runs sequentially) swapped rank with the noise. Among ties the more specific cause leads.
TIE = 1.25
# On a loaded host the pipeline's repeats of one run spread wider than TIE (chess beside two
# CPU hogs: 4,012-7,719 examples/s), and a tie cut at 1.25x took a finding in one run and
# left it out in the next: the factor follows the run's noise, up to MAX_TIE. That noise is
# the median spread over every rate timed (Evidence.spread), not the pipeline's alone: its
# three repeats gave 1.25x in one run and over 2x in the next, and the tie (tfrecord_features'
# parse alone, then five findings) with it.
MAX_TIE = 2.0
# On a busy host (measure.HostLoad.busy) a gain moves further between runs than one run's
# repeats show: beside two CPU hogs jena_window_generator's steps per call was not advised in
# 2 runs of 5, tied with its gather in 2 and read beyond 1.25x of it in 1, where one run's
# rates spread under 1.15x. Its gains are a tie within this factor at least.
BUSY_TIE = 1.5


def tie_factor(ctx: Evidence) -> float:
    """Expected gains within this factor of the run's largest are a tie: TIE (BUSY_TIE on a
    busy host), or the run's noise (the median of its rates' spreads) when wider, at most
    MAX_TIE."""
    least = BUSY_TIE if ctx.busy_host else TIE
    return round(min(MAX_TIE, max(least, ctx.spread)), 2)


def _tied_runs(
    ranked: list[Finding],
    group: Callable[[Finding], tuple[int, ...]],
    priority: Callable[[Finding], int],
    tie: float = TIE,
) -> list[list[Finding]]:
    """`ranked` (by group, then gain) cut into runs of tied gains, each by priority. A run
    holds the findings within TIE of its largest gain, not a chain of neighbours within TIE
    of each other (2.0, 1.7 and 1.45 chained into one tie whose ends are 1.38x apart, and
    the tie said "within 1.25x of each other")."""
    out: list[list[Finding]] = []
    run: list[Finding] = []
    for f in ranked:
        if run and (group(f) != group(run[0]) or not _tied(run[0], f, tie)):
            out.append(sorted(run, key=priority))
            run = []
        run.append(f)
    if run:
        out.append(sorted(run, key=priority))
    return out


def _tied(lead: Finding, f: Finding, tie: float) -> bool:
    """Whether `f`'s gain is within the noise of the larger `lead`'s: their gain ranges
    overlap within `tie` (the run's noise), or without ranges their gains are within `tie`.
    Beside two CPU hogs ranges alone parted a 1.0-1.3x parse from a 1.3-1.6x prefetch in
    one run and not the next, and the first finding with them."""
    if lead.expected_range is None or f.expected_range is None:
        return _gain(lead) <= tie * _gain(f)
    return lead.expected_range[0] <= tie * f.expected_range[1]


def _ties_by_priority(
    ranked: list[Finding],
    group: Callable[[Finding], tuple[bool, ...]],
    priority: Callable[[Finding], int],
) -> list[Finding]:
    """`ranked` (by group, then gain) with each run of tied gains reordered by priority."""
    return [f for run in _tied_runs(ranked, group, priority) for f in run]


def _timed_tie(run: list[Finding]) -> bool:
    """A run of two or more findings that each expect a speed gain (a tie worth saying)."""
    return len(run) > 1 and all(f.expected_speedup is not None for f in run)


def tie_statement(run: list[Finding], tie: float = TIE) -> str:
    """'per_example_map and sequential_map tie: expected ~1.90x and ~2.10x are within the
    noise (1.25x of each other); ranked by the rules' priority', each gain with its range
    (rules' gain_ranges) when known: a tie is either."""
    codes = [f.code for f in run]
    gains = [_said(f) for f in run]
    both = ", ".join(codes[:-1]) + " and " + codes[-1]
    gained = ", ".join(gains[:-1]) + " and " + gains[-1]
    ranged = all(f.expected_range is not None for f in run)
    why = f"ranges that overlap within {tie}x" if ranged else f"{tie}x of each other"
    return (
        f"{both} tie: expected {gained} are within the noise ({why}); ranked by the rules' priority"
    )


def _said(f: Finding) -> str:
    """'~1.90x', or '~1.90x (1.20-2.40x)' with its range."""
    said = f"~{f.expected_speedup or 0.0:.2f}x"
    return said if f.expected_range is None else f"{said} ({_span(f.expected_range)})"


def _span(gains: tuple[float, float]) -> str:
    """'1.2-2.5x': a gain range as the report says it, its ends rounded outward to the tenth
    the gains are said in, so that the range holds its gain as printed ("~1.0x" beside
    1.05-1.19x read as a gain outside its own range: 1.049 rounded two ways)."""
    low = math.floor(gains[0] * 10 + 1e-6) / 10
    high = math.ceil(gains[1] * 10 - 1e-6) / 10
    return f"{low:.1f}-{high:.1f}x"


def _gain(f: Finding) -> float:
    return max(f.expected_speedup or 0.0, 1e-9)
