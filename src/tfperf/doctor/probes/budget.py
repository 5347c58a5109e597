"""The doctor's time budget: a deadline split over its phases and probes, the probe in
progress and the time left (for the progress bar), and every repeat measured so far (what
Ctrl-C prints). A probe that the budget leaves no time for is reported as not measured.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from tfperf.measure import Measurement, Probe, Run

DOCTOR_SECONDS = 90.0  # `tfperf doctor` by default
FIX_SECONDS = 300.0  # `tfperf doctor --fix` by default, the diagnosis included
MIN_PROBE_SECONDS = 0.2  # a repeat timed for less than this says little
NOT_MEASURED = "not measured within the time budget"
OnProbe = Callable[[str, float], None]  # (probe name, seconds left) before each repeat
# Set by `tfperf doctor`'s Ctrl-C handler: a KeyboardInterrupt raised inside TensorFlow can
# come back as an op error that a probe reports as not measured; the next repeat stops here.
INTERRUPTED = threading.Event()


class OutOfTime(Exception):
    """Raised in place of a probe's run once its phase has no time left."""

    def __init__(self, seconds: float):
        super().__init__(f"{NOT_MEASURED} ({seconds:.0f} s)")


class Abandoned(OutOfTime):
    """A repeat still running at its hard deadline: left to end in a background thread (a
    compiled pull cannot be cut), its result dropped."""

    def __init__(self, name: str, seconds: float, text: str | None = None):
        Exception.__init__(
            self,
            text
            or f"{NOT_MEASURED}: one repeat of '{name}' was still running after {seconds:.0f} s "
            "(an element slower than the budget left) and was abandoned",
        )


def progress_text(label: str) -> str:
    """What the progress display says for `label`: "checking X" (a candidate's rewrite and
    its multiset check) as it is, a probe or trial as "measuring X"."""
    return label if label.startswith("checking ") else f"measuring {label}"


def process_seconds() -> float:
    """Wall seconds since this process started (its start-up counts against a budget)."""
    import psutil

    return max(0.0, time.time() - psutil.Process().create_time())


GRACE = 0.05  # of the whole budget: how long past its end a required repeat may still run


def run_within(fn: Callable[[], Any], seconds: float, name: str) -> Any:
    """`fn()` in a daemon thread (this context's variables with it); Abandoned when it has
    not returned after `seconds` (it then ends on its own, its result dropped)."""
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            box["out"] = ctx.run(fn)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            box["exc"] = exc

    start = time.monotonic()
    worker = threading.Thread(target=work, name=f"tfperf probe {name}", daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise Abandoned(name, time.monotonic() - start)
    if "exc" in box:
        raise box["exc"]
    return box["out"]


class Budget:
    """A deadline `seconds` from now; `measured` collects every repeat's run by name.
    `hard_end`: past it no repeat runs on (the whole budget's end plus GRACE; a part
    shares its parent's)."""

    def __init__(self, seconds: float, on_probe: OnProbe | None = None):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.hard_end = self.end + GRACE * seconds
        self.on_probe = on_probe
        self.measured: dict[str, Measurement] = {}
        # Required rates abandoned in their first round: name -> why (a "not measured" row,
        # never an error; shared with parts, as `measured`).
        self.abandoned: dict[str, str] = {}

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def part(self, seconds: float) -> Budget:
        """A budget of at most `seconds` of this one's time, sharing its display and
        record of measurements."""
        sub = Budget(min(seconds, self.left()), self.on_probe)
        sub.measured = self.measured
        sub.abandoned = self.abandoned
        sub.hard_end = self.hard_end
        return sub

    def per_probe(self, seconds: float, probes: int, repeats: int) -> float:
        """Seconds each timed repeat may take when `probes` probes share `seconds`, each
        repeated `repeats` times (half of it: warm-ups and tracing take the rest)."""
        return max(MIN_PROBE_SECONDS, seconds / 2 / max(1, probes * repeats))

    def watch(
        self, probe: Probe, *, until: float | None = None, required: bool = False, row: bool = False
    ) -> Probe:
        """`probe`, shown on the progress display before each repeat and recorded after it.
        Past `until` (a time.monotonic() deadline, default this budget's end) a probe not
        `required` raises OutOfTime instead of running. A repeat still running at the end
        of this budget is abandoned (Abandoned); a required one at `hard_end`. With `row`,
        a required one abandoned before its first run is recorded in `abandoned` and times
        nothing from then on (a "not measured" row, never an error: its later rounds return
        an empty Run) instead of raising."""
        deadline = self.end if until is None else until
        runs: list[Run] = []  # a probe measured once is not dropped later: rounds stop on their own
        gone: list[str] = []  # why this probe was abandoned before its first run

        def run_once() -> Run:
            if INTERRUPTED.is_set():
                raise KeyboardInterrupt
            if gone:
                return Run(0.0, 0, 0)  # no second thread on a pull that outlasted the budget
            if not required and not runs and time.monotonic() > deadline:
                raise OutOfTime(self.seconds)
            if self.on_probe is not None:
                self.on_probe(probe.name, self.left())
            # An element slower than the time left must not hold the call past its budget.
            hard = self.hard_end if required else min(self.end, self.hard_end)
            if hard <= time.monotonic():  # past the hard end: no thread started at all
                if runs:
                    return Run(0.0, 0, 0)
                if not required:
                    raise OutOfTime(self.seconds)
                if not row:
                    raise Abandoned(probe.name, 0.0)
                gone.append(
                    f"{NOT_MEASURED}: no time was left for '{probe.name}' (an earlier repeat "
                    "outlasted the budget)"
                )
                self.abandoned[probe.name] = gone[0]
                return Run(0.0, 0, 0)
            try:
                run = run_within(probe, hard - time.monotonic(), probe.name)
            except Abandoned as exc:
                if not runs:
                    if not (required and row):
                        raise
                    gone.append(str(exc))
                    self.abandoned[probe.name] = gone[0]
                return Run(0.0, 0, 0)  # a later repeat dropped (no time, no pair): the first stand
            runs.append(run)
            self.measured.setdefault(probe.name, Measurement(probe.name)).runs.append(run)
            return run

        return Probe(probe.name, run_once)

    def so_far(self) -> dict[str, Any]:
        """What was measured so far: per probe its median examples/s and repeats."""
        return {
            name: {"examples_per_s": round(m.examples_per_s.median, 1), "repeats": len(m.runs)}
            for name, m in self.measured.items()
            if m.runs and any(r.examples for r in m.runs)
        }


FIRST_ELEMENT = "first element"  # the name a first pull is recorded under in `abandoned`


def first_within(ds: Any, budget: Budget, what: str = FIRST_ELEMENT) -> Callable[[], Any]:
    """sample() -> `ds`'s first element (None when empty), pulled once, in a thread, until
    the budget's hard end: an element slower than the budget left raises Abandoned (the
    caller reports it as not measured) instead of holding the call."""
    box: list[Any] = []

    def sample() -> Any:
        if what in budget.abandoned:  # pulled before and abandoned: no second thread
            raise Abandoned(what, 0.0, budget.abandoned[what])
        if not box:
            pull = lambda: next(iter(ds.take(1)), None)  # noqa: E731
            try:
                box.append(run_within(pull, budget.hard_end - time.monotonic(), what))
            except Abandoned as exc:
                budget.abandoned[what] = str(exc)
                raise
        return box[0]

    return sample


@dataclass
class FixClock:
    """The time budget of one --fix: seconds per timed repeat, and trials still to come
    (each trial gets an equal share of what is left, the final check one more)."""

    budget: Budget
    limit: float
    trials_left: int
    dearest: float = 0.0  # wall seconds of the dearest trial so far (builds, traces included)
    started: float = 0.0
    # time.monotonic() by which the trial in progress must have checked its examples: half
    # its share (one pass of a slow pipeline and of its rewrite took 26 s of a 10 s budget).
    check_deadline: float | None = None
    checked: int = 0  # multiset checks started (the first is the top candidate's)

    def next_trial(self) -> float | None:
        """Seconds for the next trial's timed rounds: an equal share of what is left, at
        least MIN_TRIAL_SECONDS (the most promising candidates come first, and the first
        gets at least TOP_TRIAL_SHARE of what is left); None once what is left must go to
        the final check (which costs about as much as a trial)."""
        now = time.monotonic()
        first = not self.started
        if self.started:
            self.dearest = max(self.dearest, now - self.started)
        self.started = now
        left = self.budget.left()
        share = left / (self.trials_left + 1)
        if first:  # the top candidate (best first): a build, a check and a trial on a slow host
            share = max(share, TOP_TRIAL_SHARE * left)
        self.trials_left = max(0, self.trials_left - 1)
        if left < 2 * max(MIN_TRIAL_SECONDS, self.dearest):
            return None
        seconds = max(share, MIN_TRIAL_SECONDS)
        self.check_deadline = now + seconds / 2
        return seconds

    def check_until(self, *, retry: bool = False, longer: int = 0) -> float | None:
        """The deadline of the trial in progress's multiset check, asked when the check
        starts: half the trial's share, but at least CHECK_FLOOR_SECONDS from now while the
        budget has twice that left (on a loaded host, building the candidate can eat the
        whole half, and a check cut after 0 examples keeps nothing); the first check (the
        top candidate's) at least TOP_CHECK_SHARE of the budget. `retry`: a smaller sample
        after a cut, given the floor again (doubled `longer` times: a pass cut before its
        first element needs time, not a smaller sample); None once the budget cannot
        spare it."""
        if self.check_deadline is None:
            return None
        left = self.budget.left()
        floor = min(CHECK_FLOOR_SECONDS, left / 2)
        if not self.checked:
            floor = max(floor, min(TOP_CHECK_SHARE * self.budget.seconds, left / 3))
        self.checked += 1
        now = time.monotonic()
        if retry:
            wait = CHECK_FLOOR_SECONDS * 2**longer
            return now + wait if left >= 2 * wait else None
        return max(self.check_deadline, now + floor)


# Set while a --fix runs under a budget (a context variable: no parameter through every
# helper, and a nested or concurrent fix keeps its own).
FIX_CLOCK: ContextVar[FixClock | None] = ContextVar("tfperf_fix_clock", default=None)
MIN_TRIAL_SECONDS = 2.0  # a trial with less time than this is reported as not measured
CHECK_FLOOR_SECONDS = 3.0  # a multiset check's least time (its passes build their iterators)
TOP_CHECK_SHARE = 0.1  # of the whole budget, reserved for the top candidate's check
TOP_TRIAL_SHARE = 0.25  # of what is left, the top candidate's trial at least


def fix_clock(budget: Budget, trials: int, repeats: int) -> Token[FixClock | None]:
    """Sets the clock of a --fix of `trials` candidates; returns the token to reset it."""
    limit = budget.per_probe(budget.left(), 2 * (trials + 1), max(2, repeats))
    return FIX_CLOCK.set(FixClock(budget, limit, trials))
