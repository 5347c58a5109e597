"""How busy the rest of the host kept the cores this process may run on, while it measured:
the busy CPU time of those cores (psutil; /proc/stat on Linux, where a container sees the
whole host's work on them) minus this process's own, per wall second, in each interval
between two samples. On a shared host the doctor's cost model gives input and model the
cores the rest left them (beside two CPU busy loops on 2 cores: about 1).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

from tfperf.measure.runs import Stat

MIN_INTERVAL_S = 0.2  # shorter intervals are folded into the next: clock ticks are 10 ms
BUSY = 0.25  # other work on this many cores or more (median) is a busy host, said in reports
# Cores are said to a tenth, and held at it: a median of 1.749 kept to the hundredth (1.75)
# read "1.8" in --json once formatted and "1.7" in the note, formatted from 1.749.
CORE_PLACES = 1


def _cpus() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is not known)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(psutil.cpu_count() or 1))


def _busy(cpus: list[int]) -> float:
    """Busy CPU seconds of `cpus` since boot (guest time is already within user time)."""
    per_cpu = psutil.cpu_times(percpu=True)
    total = 0.0
    for i in cpus:
        if i < len(per_cpu):
            t = per_cpu[i]
            idle = t.idle + getattr(t, "iowait", 0.0)
            guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
            total += sum(t) - idle - guest
    return total


def _own() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system


@dataclass
class HostLoad:
    """Samples (`sample()`, e.g. after each timed repeat) of other work's busy cores and this
    process's own, one value per interval; `others` and `own` summarise them."""

    cpus: list[int] = field(default_factory=_cpus)
    others_per_interval: list[float] = field(default_factory=list)
    own_per_interval: list[float] = field(default_factory=list)
    _last: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        self._last = (time.monotonic(), _busy(self.cpus), _own())

    def sample(self) -> None:
        """Closes the interval since the last sample (unless shorter than MIN_INTERVAL_S)."""
        now, busy, own = time.monotonic(), _busy(self.cpus), _own()
        assert self._last is not None
        t0, busy0, own0 = self._last
        wall = now - t0
        if wall < MIN_INTERVAL_S:
            return
        mine = max(0.0, own - own0) / wall
        self.own_per_interval.append(mine)
        self.others_per_interval.append(max(0.0, (busy - busy0) / wall - mine))
        self._last = (now, busy, own)

    @property
    def cores(self) -> int:
        return len(self.cpus)

    @property
    def others(self) -> Stat:
        """Cores other work kept busy: median and min-max over the intervals."""
        return Stat.of([min(float(self.cores), x) for x in self.others_per_interval])

    def free_cores(self) -> float | None:
        """The cores the rest of the host left this process (the median interval's), never
        fewer than this process itself kept busy; None before any interval closed."""
        if not self.others_per_interval:
            return None
        left = self.cores - self.others.median
        own = Stat.of(self.own_per_interval).median
        return round(min(float(self.cores), max(left, own)), CORE_PLACES)

    @property
    def busy(self) -> bool:
        """Whether other work kept BUSY cores or more busy (median interval)."""
        return bool(self.others_per_interval) and self.others.median >= BUSY

    def to_dict(self) -> dict[str, object]:
        others = self.others
        return {
            "cores": self.cores,
            "others_busy_cores": round(others.median, CORE_PLACES),
            "others_busy_cores_range": [
                round(others.min, CORE_PLACES),
                round(others.max, CORE_PLACES),
            ],
            "free_cores": self.free_cores(),
            "intervals": len(self.others_per_interval),
        }
