"""What a busy host leaves the diagnosis: the cores the cost model gives input and model,
and the note that says how busy the rest of the host kept them (measure.HostLoad)."""

from __future__ import annotations

from tfperf.measure import Measurement
from tfperf.measure.host_load import CORE_PLACES, HostLoad


def free_cores(load: HostLoad, training: Measurement) -> float | None:
    """The cores the cost model gives input and model: those other work left (HostLoad),
    never fewer than training itself kept busy (its CPU seconds per wall second, median
    repeat): chess's training kept 1.0 core busy beside two CPU hogs where the median
    interval left 0.8. None when no interval was sampled."""
    left = load.free_cores()
    if left is None:
        return None
    used = training.cpu_us_per_example.median * training.examples_per_s.median * 1e-6
    return round(min(float(load.cores), max(left, used)), CORE_PLACES)


def busy_host_note(load: HostLoad, free: float | None) -> str:
    """What a busy host did to the figures: other work's cores (median interval, with the
    least and most) and the cores the expected gains gave input and model, said as derived
    from those figures."""
    o = load.others
    head = (
        f"a busy host: other work kept {o.median:.1f} ({o.min:.1f}-{o.max:.1f}) of this "
        f"process's {load.cores} cores busy while the rates were timed; "
    )
    left = load.free_cores()
    if free is None or left is None:
        gave = ""
    elif free > left:
        gave = (
            f"the expected gains give input and model the {free:.1f} cores training kept "
            f"busy (more than the {left:.1f} the median left); "
        )
    else:
        gave = f"the expected gains give input and model the {free:.1f} cores the median left; "
    return head + gave + "another run may read other rates"
