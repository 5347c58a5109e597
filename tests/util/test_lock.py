"""The folder lock with real processes: a live holder is refused by name, a killed one's
lock is stale and taken over, and the lock file goes when the holder is done."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tfperf.util.lock import LOCK_NAME, FolderInUseError, folder_lock, holder_alive, read_holder

HOLD = """
import sys, time
from tfperf.util.lock import folder_lock
with folder_lock(sys.argv[1], "test holder"):
    print("held", flush=True)
    time.sleep(120)
"""


def _holder(folder) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_live_holder_is_refused_by_pid_and_a_killed_one_is_taken_over(tmp_path):
    proc = _holder(tmp_path)
    try:
        assert holder_alive(tmp_path)
        with pytest.raises(FolderInUseError) as err:
            with folder_lock(tmp_path, "second", what="train.out_dir"):
                pass
        assert f"train.out_dir {tmp_path} is in use by PID {proc.pid}" in str(err.value)
        assert "(test holder) since" in str(err.value)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert (tmp_path / LOCK_NAME).exists() and not holder_alive(tmp_path)  # stale
    with folder_lock(tmp_path, "after the kill"):
        assert read_holder(tmp_path).pid == os.getpid()
    assert not (tmp_path / LOCK_NAME).exists()


def test_the_lock_is_reentrant_in_one_process_and_released_once(tmp_path):
    with folder_lock(tmp_path / "new", "outer"):
        with folder_lock(tmp_path / "new", "inner"):
            assert read_holder(tmp_path / "new").purpose == "outer"
        assert (tmp_path / "new" / LOCK_NAME).exists()
    assert not (tmp_path / "new" / LOCK_NAME).exists()


def test_a_lock_from_another_host_is_never_taken_over(tmp_path):
    holder = {"pid": 1, "host": "elsewhere.example", "since": time.time(), "purpose": "x"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(holder))
    with pytest.raises(FolderInUseError, match="PID 1 on elsewhere.example"):
        with folder_lock(tmp_path, "me"):
            pass
