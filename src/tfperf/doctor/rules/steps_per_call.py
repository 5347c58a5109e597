"""A step too short for one call each: every compiled call pays the dispatch from Python and
the host round trip once, so a run that calls the train function for one step (or a few)
at a time loses to one that runs many steps per call. Timed on the user's model: the
compute limit at the run's own steps per call (train.steps_per_loop; model.fit's
steps_per_execution) against doctor.steps per call."""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import STEPS_VARIANT, Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rules.registry import BUSY_TIE, Rewrite, rule
from tfperf.measure import each_pair_gains, inverse
from tfperf.util.format import number, plural

STEPS_GAIN = 1.1  # more steps per call must make the step this much faster to be advised
STEPS_PER_CALL = Rewrite("steps per call")  # the run file's train.steps_per_loop: auto


@rule("steps_per_call", "compute", 145, rewrites=(STEPS_PER_CALL,))
def rule_steps_per_call(ctx: Evidence) -> list[Finding]:
    name = next((k for k in ctx.variants if k.startswith(STEPS_VARIANT)), None)
    if name is None:
        return []
    few, rate = int(name.removeprefix(STEPS_VARIANT)), ctx.variants[name]
    many = ctx.steps_per_call
    ratio = ctx.compute / max(1e-9, rate)
    # Each pair must gain STEPS_GAIN on its own: a loaded host delays every call's dispatch,
    # and a small gain of its own making read 1.3x in one run and 1.07x in the next.
    c = ctx.paired.get(name)
    gains = inverse(c) if c else None  # the limit's gain over one step per call, per pair
    # A gain beyond the busy tie is not the host's doing: one stalled pair among three (the
    # limit's repeat waiting for a core) no longer hides a 6.5x gain of a tiny Keras step.
    one_short = (
        gains is not None
        and gains.ratio >= BUSY_TIE
        and each_pair_gains(gains, STEPS_GAIN - 1, pairs=3)
    )
    if not (ctx.loses_to_compute(name, STEPS_GAIN - 1) or one_short):
        return []
    # On a busy host each call's dispatch waits for a core when another process holds it:
    # flowers' 25 ms step read 1.45x in one run of five beside two CPU hogs and ~1.0x in the
    # others. The gain must then reach the busy host's tie (registry.BUSY_TIE), as a gain
    # must to lead another finding there.
    if ctx.busy_host and (gains.ratio if gains else ratio) < BUSY_TIE:
        return []
    pairs = f"; {gains.low:.2f}-{gains.high:.2f}x per pair" if gains else ""
    # The run trains at `rate` per example on the compute side: its training is bounded by
    # the slower of the pipeline and that, and would be by the pipeline and the limit.
    gain = ctx.limit / max(1e-9, min(ctx.pipeline, rate))
    return [
        Finding(
            "steps_per_call",
            "each train call runs too few steps",
            None,
            f"compute limit at {plural(few, 'step')} per call (as the run calls it): "
            f"{number(rate)} ex/s; at {many} steps per call: {number(ctx.compute)} ex/s "
            f"({ratio:.2f}x{pairs}, the same model and batch in paired, interleaved repeats): "
            "each call pays the dispatch and the host round trip once",
            f"train.steps_per_loop: auto (or {many}); model.fit: model.compile(..., "
            f"steps_per_execution={many}); the results stay the same (callbacks then see "
            f"every {many}th batch)",
            f"training ~{gain:.1f}x faster",
            gain,
            "compute",
        )
    ]
