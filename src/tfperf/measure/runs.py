"""What one timed run found and how repeats of it are summarised: `Run` (one repeat),
`Measurement` (all repeats of one variant), `Stat` (median, min, max). No TensorFlow here."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Stat:
    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: list[float]) -> Stat:
        if not values:
            return cls(0.0, 0.0, 0.0)
        return cls(statistics.median(values), min(values), max(values))

    @property
    def spread(self) -> float:
        """Largest over smallest value (1.0 for one value, or none above zero)."""
        return self.max / self.min if self.min > 0 else 1.0

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max}


@dataclass(frozen=True)
class Run:
    """One timed repeat, warm-up excluded."""

    seconds: float
    batches: int
    examples: int
    # CPU time of this whole process (all TensorFlow threads) while timing: steadier than
    # wall time on a machine shared with other jobs, and what input and model share.
    cpu_seconds: float = 0.0
    # Time the train step waited for its input (training probes only).
    wait_seconds: float = 0.0


@dataclass
class Measurement:
    """Every repeat of one variant; rates are medians over repeats (one noisy moment of a
    shared machine does not decide), spreads are min..max."""

    name: str
    runs: list[Run] = field(default_factory=list)

    def _stat(self, fn: Callable[[Run], float]) -> Stat:
        return Stat.of([fn(r) for r in self.runs if r.seconds > 0])

    @property
    def examples_per_s(self) -> Stat:
        return self._stat(lambda r: r.examples / r.seconds)

    @property
    def batches_per_s(self) -> Stat:
        return self._stat(lambda r: r.batches / r.seconds)

    @property
    def cpu_us_per_example(self) -> Stat:
        return self._stat(lambda r: r.cpu_seconds / max(1, r.examples) * 1e6)

    @property
    def timed_repeats(self) -> int:
        """Repeats that timed something (a dropped or abandoned one times nothing)."""
        return sum(1 for r in self.runs if r.seconds > 0)

    @property
    def examples_per_batch(self) -> float:
        return sum(r.examples for r in self.runs) / max(1, sum(r.batches for r in self.runs))

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.runs)

    @property
    def input_bound_fraction(self) -> float:
        """Share of the timed wall time the train step waited for input (all repeats)."""
        wall = self.seconds
        return sum(r.wait_seconds for r in self.runs) / wall if wall > 0 else 0.0

    @property
    def input_bound_fractions(self) -> list[float]:
        """Each repeat's own share of its wall time spent waiting for input (the spread of
        `input_bound_fraction`)."""
        return [r.wait_seconds / r.seconds for r in self.runs if r.seconds > 0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "examples_per_s": self.examples_per_s.to_dict(),
            "batches_per_s": self.batches_per_s.to_dict(),
            "cpu_us_per_example": self.cpu_us_per_example.to_dict(),
            "input_bound_fraction": self.input_bound_fraction,
            "runs": [asdict(r) for r in self.runs],
        }


def median_spread(measurements: Iterable[Measurement]) -> float:
    """The run's noise: the median, over every variant timed at least twice, of its slowest
    to fastest repeat (1.0 when none was). One variant's three repeats beside two CPU hogs
    spread anywhere from 1.2x to 2.5x from one run to the next; the median over a dozen
    (the required rates and every stage prefix) moves far less."""
    spreads = [m.examples_per_s.spread for m in measurements if m.timed_repeats >= 2]
    return statistics.median(spreads) if spreads else 1.0
