"""measure.HostLoad: other work's busy cores and this process's own, per interval between
samples, from the real CPU counters while a real busy loop runs in another process."""

from __future__ import annotations

import subprocess
import sys
import time

from tfperf.measure.host_load import BUSY, HostLoad


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_busy_loop_elsewhere_is_other_work_and_our_own_loop_is_ours():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # the loop is running
        load = HostLoad()
        for _ in range(3):
            time.sleep(0.4)  # this process idle: the busy cores are the others'
            load.sample()
        for _ in range(3):
            _spin(0.4)
            load.sample()
    finally:
        hog.kill()
        hog.wait()
    assert len(load.others_per_interval) == 6
    # However loaded the host, a busy loop gets a share of a core, and an idle process none.
    assert min(load.others_per_interval[:3]) >= 0.2, load.others_per_interval
    assert max(load.own_per_interval[:3]) < 0.5, load.own_per_interval  # TF threads idle
    assert min(load.own_per_interval[3:]) > 0.05, load.own_per_interval
    assert load.busy and load.others.median >= BUSY
    free = load.free_cores()
    assert free is not None and 0 < free <= load.cores
    d = load.to_dict()
    assert d["cores"] == load.cores and d["intervals"] == 6
    low, high = d["others_busy_cores_range"]
    assert low <= d["others_busy_cores"] <= high <= load.cores


def test_intervals_shorter_than_the_clock_resolution_fold_into_the_next():
    load = HostLoad()
    load.sample()  # at once: too short to read, no interval
    assert load.others_per_interval == [] and load.free_cores() is None and not load.busy
    time.sleep(0.25)
    load.sample()
    assert len(load.others_per_interval) == 1
