"""Whether variant B beats variant A beyond the noise, from paired repeats: repeat i of A
and repeat i of B ran back to back, so a slow moment of the machine hits both, and their
ratio cancels it. B is "faster" only when every paired ratio is above 1 and their median
clears `min_gain`; "slower" likewise below; otherwise "same"."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Literal

from tfperf.measure.runs import Measurement

Verdict = Literal["faster", "slower", "same"]
# A gain smaller than this is not worth a change, even when every pair agrees.
DEFAULT_MIN_GAIN = 0.03


@dataclass(frozen=True)
class Comparison:
    """B against A: per-pair ratios of examples/s (B / A), their median and spread."""

    ratios: tuple[float, ...]
    verdict: Verdict

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios) if self.ratios else 1.0

    @property
    def low(self) -> float:
        return min(self.ratios, default=1.0)

    @property
    def high(self) -> float:
        return max(self.ratios, default=1.0)

    @property
    def faster(self) -> bool:
        return self.verdict == "faster"

    def to_dict(self) -> dict[str, object]:
        return {
            "ratio": self.ratio,
            "low": self.low,
            "high": self.high,
            "ratios": list(self.ratios),
            "verdict": self.verdict,
        }


def paired_ratios(a: Measurement, b: Measurement) -> tuple[float, ...]:
    """examples/s of B over A, repeat by repeat (pairs where both ran)."""
    out = []
    for ra, rb in zip(a.runs, b.runs, strict=False):
        if ra.seconds > 0 and rb.seconds > 0 and ra.examples > 0:
            out.append((rb.examples / rb.seconds) / (ra.examples / ra.seconds))
    return tuple(out)


def judge(ratios: tuple[float, ...], min_gain: float = DEFAULT_MIN_GAIN) -> Verdict:
    """The sign rule of the module docstring; one pair alone never decides."""
    if len(ratios) < 2:
        return "same"
    median = statistics.median(ratios)
    if all(r > 1.0 for r in ratios) and median >= 1.0 + min_gain:
        return "faster"
    if all(r < 1.0 for r in ratios) and median <= 1.0 / (1.0 + min_gain):
        return "slower"
    return "same"


def compare(a: Measurement, b: Measurement, *, min_gain: float = DEFAULT_MIN_GAIN) -> Comparison:
    """B against A from their paired repeats (see the module docstring)."""
    ratios = paired_ratios(a, b)
    return Comparison(ratios, judge(ratios, min_gain))


# The fewest pairs among which one against a gain may be an outlier of the host's load
# (beside two CPU hogs a baseline's repeat once ran 2x its median: 0.46x against 1.22x):
# all but one of 5 pairs above 1 is about as likely under pure noise as all of 3 (19%
# against 12%; 6 of 7: 6%).
SECOND_LOOK_PAIRS = 5


def pairs_against(c: Comparison) -> int:
    """Pairs without a gain (B at or below A)."""
    return sum(1 for r in c.ratios if r <= 1.0)


def promising(c: Comparison, min_gain: float) -> bool:
    """Not faster yet, but a median gain of `min_gain` that more pairs could confirm: one
    pair against it at most (a second never turns back)."""
    return c.verdict == "same" and c.ratio >= 1.0 + min_gain and pairs_against(c) <= 1


def inverse(c: Comparison) -> Comparison:
    """A against B: each pair's ratio turned over (the gain of A where B is the what-if)."""
    flip: dict[Verdict, Verdict] = {"faster": "slower", "slower": "faster", "same": "same"}
    return Comparison(tuple(1.0 / r for r in c.ratios), flip[c.verdict])


def each_pair_gains(c: Comparison, min_gain: float, pairs: int = SECOND_LOOK_PAIRS) -> bool:
    """Every pair a gain of `min_gain` on its own, or all but one among `pairs` or more: for
    a small effect the host's load itself can make, where the median of pairs above 1 is
    not enough (beside two CPU hogs one step per call of a 25 ms conv step read 0.98, 0.66
    and 0.75 of the limit's rate in one run, 0.94, 0.91, 0.93 in the next)."""
    short = sum(1 for r in c.ratios if r < 1.0 + min_gain)
    enough = len(c.ratios) >= 2 and short == 0
    return enough or (len(c.ratios) >= pairs and short <= 1)


def gain_but_one(c: Comparison, min_gain: float, pairs: int = SECOND_LOOK_PAIRS) -> bool:
    """At least `pairs` pairs, all but one above 1, and a median gain of `min_gain`."""
    return len(c.ratios) >= pairs and pairs_against(c) <= 1 and c.ratio >= 1.0 + min_gain
