"""Rounds beyond the phases' own, within a share of the time left: the three required rates
topped up to the repeats a verdict needs, and a second look at a paired what-if whose median
gain one pair contradicts."""

from __future__ import annotations

from collections.abc import Callable

from tfperf.config import DoctorConfig
from tfperf.doctor.diagnosis.verdict import REQUIRED
from tfperf.doctor.evidence.evidence import (
    COMPUTE_VARIANTS,
    PAIRED_COMPUTE,
    PAIRED_TRAINING,
    TRAINING_VARIANTS,
)
from tfperf.doctor.probes.budget import Budget
from tfperf.measure import SECOND_LOOK_PAIRS, Measurement, Probe, compare, promising, side_by_side

Tick = Callable[[str], None]  # called with a probe's name after each timed repeat

# Fewer timed repeats of a required rate give no spread worth the name: beside two CPU hogs
# one repeat gave a bare verdict in one run and a false "inconsistent" in the next.
MIN_REQUIRED_REPEATS = 3
TOP_UP_SHARE = 0.4  # of the time left that the required rates' extra rounds may take
# A paired what-if with this median gain and one pair against it gets a second look.
SECOND_LOOK_GAIN = 0.05
SECOND_LOOK_SHARE = 0.5  # of the time left that a second look's rounds may take


def _rounds(
    again: list[Probe],
    measured: dict[str, Measurement],
    repeats: int,
    tick: Tick,
    seconds: float,
) -> dict[str, Measurement] | None:
    """`repeats` more rounds of `again`, none starting past what would end after `seconds`;
    None when one round does not fit. A round takes about what the slowest repeats took,
    plus a warm-up as long."""
    round_s = sum(2 * max(r.seconds for r in measured[p.name].runs) for p in again)
    if round_s > seconds:
        return None
    return side_by_side(
        again,
        repeats=repeats,
        on_run=lambda name, _: tick(name),
        time_limit=seconds - round_s,  # no round starts that would end past `seconds`
    )


def top_up(
    measured: dict[str, Measurement],
    probes: list[Probe],
    d: DoctorConfig,
    tick: Tick,
    budget: Budget,
) -> None:
    """Rounds of the three required rates alone, appended to `measured`, while one of them
    has fewer than MIN_REQUIRED_REPEATS timed repeats and a round fits in TOP_UP_SHARE of the
    time left: the stage prefixes, timed in the same rounds, can leave time for one round
    only, and the verdict and its range are drawn from these three. Stage costs pair rounds
    by index, so the extra rounds (beyond the stages' last) pair with nothing."""
    required = [p for p in probes if p.name in REQUIRED]
    have = min(measured[p.name].timed_repeats for p in required)
    # doctor.repeats: 1 (--repeats 1) asks for one repeat: no extra rounds then.
    if have == 0 or have >= MIN_REQUIRED_REPEATS or d.repeats < 2:
        return  # an abandoned rate gets no second chance; enough repeats need none
    more = _rounds(
        required, measured, MIN_REQUIRED_REPEATS - have, tick, budget.left() * TOP_UP_SHARE
    )
    for name, m in (more or {}).items():
        measured[name].runs.extend(r for r in m.runs if r.seconds > 0)


def second_look(
    measured: dict[str, Measurement],
    probes: list[Probe],
    errors: dict[str, Exception],
    tick: Tick,
    budget: Budget,
) -> None:
    """Rounds of the paired what-ifs whose median gain one pair contradicts (measure's
    `promising`), with their references, appended to `measured` until they have
    SECOND_LOOK_PAIRS pairs, when the rounds fit in SECOND_LOOK_SHARE of the time left: one
    slow moment of a loaded host hit one pair of a ~1.3x XLA gain in one run of five, and
    the model's finding came and went. The evidence then takes all but one pair above 1."""
    chosen: set[str] = set()
    pairs = SECOND_LOOK_PAIRS
    for ref, prefixes in ((PAIRED_COMPUTE, COMPUTE_VARIANTS), (PAIRED_TRAINING, TRAINING_VARIANTS)):
        base = measured.get(ref)
        if base is None or ref in errors:
            continue
        for name, m in measured.items():
            if not name.startswith(prefixes) or name in errors:
                continue
            c = compare(base, m)
            if len(c.ratios) < SECOND_LOOK_PAIRS and promising(c, SECOND_LOOK_GAIN):
                chosen |= {ref, name}
                pairs = min(pairs, len(c.ratios))
    again = [p for p in probes if p.name in chosen]  # in the rounds' order
    if not again:
        return
    more = _rounds(
        again, measured, SECOND_LOOK_PAIRS - pairs, tick, budget.left() * SECOND_LOOK_SHARE
    )
    for name, m in (more or {}).items():
        measured[name].runs.extend(m.runs)  # empty runs too: pairs are by index
