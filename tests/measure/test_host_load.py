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


def test_the_note_and_the_json_say_the_same_cores():
    """A median of 1.749 cores: --json held 1.75 (read "1.8" at a tenth) where the note,
    formatted from 1.749, said "1.7". Both now hold the tenth the note says."""
    from tfperf.doctor.diagnosis.busy_host import busy_host_note

    load = HostLoad(
        cpus=[0, 1], others_per_interval=[1.70, 1.749, 1.80], own_per_interval=[0.2] * 3
    )
    d = load.to_dict()
    note = busy_host_note(load, load.free_cores())
    low, high = d["others_busy_cores_range"]
    assert d["others_busy_cores"] == 1.7 and f"1.7 ({low:.1f}-{high:.1f}) of" in note, (d, note)
    assert f"the {d['free_cores']:.1f} cores the median left" in note and d["free_cores"] == 0.3
