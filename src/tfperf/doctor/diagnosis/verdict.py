"""The verdict of a diagnosis from its three rates: whether training waits for its input
(the input-wait fraction's band, or the boundary statement when the repeats straddle a
threshold, the pipeline alone and the compute limit are within the noise of each other, or
the model shares the host's cores with an input neither far faster nor far slower),
no verdict when training measured faster than what bounds it, and "not measured" when a
rate outlasted the budget. diagnose.py measures; this module only reads the measurements.
"""

from __future__ import annotations

from tfperf.doctor.evidence.findings import rate_text
from tfperf.measure import Measurement, Stat
from tfperf.observe.feed import HIGHLY, near_boundary, percents, verdict_range
from tfperf.util.format import number

REQUIRED = ("pipeline", "compute limit", "training")  # the three rates every verdict needs
NOT_MEASURED = "not measured"  # how a verdict lacking one of them starts


def timed(m: Measurement) -> bool:
    """Whether `m` has a repeat that timed something (an abandoned one is an empty Run)."""
    return any(r.seconds > 0 for r in m.runs)


def drawn_without(missing: list[str], pipeline: Measurement, compute: Measurement) -> str:
    """The verdict when rates in `missing` were abandoned at the budget's end: which, and
    what the two others say when only training is missing (the slower one sets the pace)."""
    head = f"{NOT_MEASURED} ({', '.join(missing)}: a repeat outlasted the time budget)"
    if missing != ["training"]:
        return head
    alone, limit = pipeline.examples_per_s.median, compute.examples_per_s.median
    side = "the input" if alone < limit else "the model's step"
    return (
        f"{head}; from the two measured, {side} sets the pace: the pipeline alone gives "
        f"{number(alone)} examples/s, the compute limit {number(limit)}"
    )


def both_rates(pipeline: Measurement, compute: Measurement) -> tuple[Stat, Stat] | None:
    """The pipeline alone's and the compute limit's examples/s when both were timed and
    read above zero: what the rules comparing the two rates read; None otherwise."""
    p, c = pipeline.examples_per_s, compute.examples_per_s
    if not (timed(pipeline) and timed(compute)) or p.max <= 0 or c.max <= 0:
        return None
    return p, c


INCONSISTENT = "inconsistent measurement"  # the verdict when none can be drawn
# Training's slowest repeat must beat the other's fastest by this much to be inconsistent:
# a few short repeats understate the noise, and training's probe warms up longer (two
# untimed calls to the pipeline probe's one), so autotune has ramped further: a py_function
# pipeline read 2,447 (2,411-2,483) examples/s in training, ~2,200 alone, beside a test run.
# Beside two CPU hogs 15% still gave "inconsistent" in 1 of 5 runs of one pipeline: the
# repeats of one run do not sample a loaded host's slower swings (its pipeline alone read
# 2,396 and 6,642 examples/s in two runs minutes apart).
MARGIN = 0.3
# Load swings between rounds beyond this (slowest / fastest repeat of one variant) are
# named as the likely cause of an inconsistent measurement.
SWING = 1.5


def inconsistency(pipeline: Measurement, compute: Measurement, training: Measurement) -> str | None:
    """Why training cannot be as measured: faster than the pipeline alone that feeds it or
    than the compute limit, beyond both spreads (its slowest repeat above the other's
    fastest, by more than MARGIN); None when consistent. Names the host's load
    changing between rounds as the cause when a variant's repeats swung by SWING."""
    train = training.examples_per_s
    if not training.runs or train.min <= 0:
        return None
    faster = [
        f"training {rate_text(training)} examples/s is faster than {what} {rate_text(m)}"
        for what, m in (("the pipeline alone", pipeline), ("the compute limit", compute))
        if m.runs and (r := m.examples_per_s).max > 0 and train.min > r.max * (1 + MARGIN)
    ]
    if not faster:
        return None
    swings = [
        f"{m.name} {m.examples_per_s.spread:.1f}x"
        for m in (pipeline, compute, training)
        if m.examples_per_s.spread >= SWING
    ]
    why = (
        "; the host's load changed between rounds (slowest to fastest repeat: "
        + ", ".join(swings)
        + ")"
        if swings
        else ""
    )
    return " and ".join(faster) + " beyond their spreads" + why


# The pipeline alone and the compute limit this close (medians) are a tie between input
# and model: which sets the pace depends on the host's load.
NEAR = 1.25


def rates_overlap(pipeline: Measurement, compute: Measurement) -> str | None:
    """Why the input may or may not set the pace whatever training's wait read: the
    pipeline alone's repeats and the compute limit's overlap, or their medians are within
    NEAR of each other (chess beside two CPU hogs: its wait read 1-3% in one run, 13-25%
    and 3-32% in the next ones, the two rates 6,585 and 6,393 examples/s). None when one is
    clearly faster."""
    rates = both_rates(pipeline, compute)
    if rates is None:
        return None
    p, c = rates
    apart = p.min > c.max or c.min > p.max
    if apart and max(p.median, c.median) > NEAR * min(p.median, c.median):
        return None
    return (
        f"the pipeline alone, {rate_text(pipeline)} examples/s, "
        f"and the compute limit, {rate_text(compute)}, are "
        "within the noise of each other: which sets the pace depends on the host's load"
    )


# The pipeline alone at least this many times the compute limit (its slowest repeat against
# the limit's fastest) keeps up with the model on a shared CPU too: at the model's pace it
# needs a third of the cores or less.
FAR = 3.0


def input_keeps_up(
    fractions: list[float], pipeline: Measurement, compute: Measurement
) -> str | None:
    """The verdict "not input-bound", said with its waits and why, when the pipeline alone is
    FAR beyond the compute limit and no repeat of training waited HIGHLY: its short waits
    are the host's load, not the pipeline's rate (beside two CPU hogs a pipeline ~10x its
    model read 4-7%, 3-5% and 1-5% in three runs, "between" in some and "not" in others,
    and kept its ~1.0x input findings when "between"). None otherwise."""
    rates = both_rates(pipeline, compute)
    if rates is None or rates[0].min < FAR * rates[1].max:
        return None
    p, c = rates
    if not fractions or max(fractions) >= HIGHLY:
        return None
    low, high = min(fractions), max(fractions)
    return (
        f"not input-bound: {percents(low, high)} waiting (the pipeline alone, "
        f"{rate_text(pipeline)} examples/s, is at least {p.min / c.max:.1f}x the compute "
        f"limit, {rate_text(compute)}: the waits are the host's load, not the pipeline's rate)"
    )


def shares_cores(
    pipeline: Measurement, compute: Measurement, cores: int, fractions: list[float] | None = None
) -> str | None:
    """Why the wait cannot say whether the input sets the pace on a host whose model runs on
    the CPU cores that feed it: neither the pipeline alone nor the compute limit is FAR
    beyond the other (the slower one's fastest repeat times FAR above the faster one's
    slowest), so the two take cores from each other and which one waits moves with the
    host's load. Beside two CPU hogs chess (its pipeline alone 0.66-1.08x its compute limit
    over five runs) waited 35-45% in one run and 3-5% in another; jena_window_generator
    (1.08-1.86x) read 12-35%. None when one is FAR beyond the other (a pipeline 10x slower
    than its model waited 90-96% in every run) or a rate was not timed. None too when the
    pipeline alone is FAR below the limit by their medians and every repeat of training
    (`fractions`) waited HIGHLY or more: the input set the pace in each, whatever the load
    did to the spreads (a py_function pipeline beside two CPU hogs, 3,786 (1,597-3,908)
    examples/s against 22,511 (11,351-29,992), waited 87-98% and read "between")."""
    rates = both_rates(pipeline, compute)
    if rates is None:
        return None
    p, c = rates
    if p.min >= FAR * c.max or c.min >= FAR * p.max:
        return None
    if fractions and min(fractions) >= HIGHLY and c.median >= FAR * p.median:
        return None
    return (
        f"the input and the model share this host's {cores} CPU cores and neither is "
        f"{FAR:.0f}x faster than the other alone (the pipeline alone {rate_text(pipeline)} "
        f"examples/s, the compute limit {rate_text(compute)}): which one waits for the other "
        "moves with the host's load, so the findings' gains, not the wait, say what to change"
    )


# The widest noise (training's slowest to fastest repeat) that widens the wait's range.
MAX_NOISE = 2.0
# A verdict that names the input a bottleneck must hold at a run's least wait divided by
# this: a shared host moves the wait further between runs than between one run's repeats.
# Beside two CPU hogs jena_window_generator's least wait read 16% to 32% over ten runs (2x)
# while each run's three repeats spread 1.1-1.4x, and its verdict read "highly" in some runs,
# "between highly and moderately" in others. Only the lower end: the upper one can only turn
# "not input-bound" into "between", and a clean pipeline's 1-4% stays "not".
WAIT_NOISE = 2.0
# Every repeat waiting this share of its time or more: the input set the pace in every one,
# however close the two rates (jena's 16-28% had read "between input-bound and not" in the
# runs where its rates overlapped, "between highly and moderately" in the others).
SETS_THE_PACE = HIGHLY / 2


def boundary_of(
    fractions: list[float], close: str | None, noise: float = 1.0, shared: str | None = None
) -> str | None:
    """The boundary statement of a verdict: `shared` (shares_cores: the model on the cores
    of an input neither far faster nor far slower) makes one whatever the repeats said;
    `close` (the two rates within the noise of each other) makes one unless every repeat
    waited SETS_THE_PACE or more; else the straddle of a threshold (verdict_range) by the
    repeats' range widened by the noise, or None.

    The lower end is divided by WAIT_NOISE, the upper one multiplied by `noise` (training's
    slowest to fastest repeat, at most MAX_NOISE): beside two CPU hogs one run of a pipeline
    read 6-19% (moderately input-bound) with its training repeats 1.9x apart, where four runs
    read 3-11% (between)."""
    if shared is not None and fractions:
        return near_boundary(fractions, shared)
    if close is not None and min(fractions, default=0.0) < SETS_THE_PACE:
        return near_boundary(fractions, close)
    if not fractions:
        return None
    low, high = min(fractions), max(fractions)
    wide = verdict_range([low / WAIT_NOISE, min(1.0, high * min(max(noise, 1.0), MAX_NOISE))])
    if wide is None:
        return None
    head = wide.split(":")[0]
    said = verdict_range(fractions)
    if said is not None and said.split(":")[0] == head:
        return said  # the repeats themselves straddle it
    why = f"training's repeats ranged {noise:.1f}x; " if noise > 1.0 else ""
    return (
        f"{head}: {percents(low, high)} (within the noise: {why}a wait may read "
        f"{WAIT_NOISE:.0f}x lower in another run on a shared host)"
    )
