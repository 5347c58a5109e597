"""data/convert/worker_watch.py: a dead worker of a real pool is named with its shard and
the signal. A convert whose writer process dies (kill -9, the OOM killer) stops with an error
naming the worker, the shard and the cause, instead of waiting forever; `--resume` then
completes byte-identical shards."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import time

import numpy as np
import psutil
import pytest

from tfperf.data.convert.options import ConvertError
from tfperf.data.convert.run import convert
from tfperf.data.convert.worker_watch import WorkerWatch
from tfperf.data.shards import progress_name
from tfperf.util.files import temp_name

SLOW_MODULE = """
import time
def slow(row):
    time.sleep(0.02)
    return row
"""


def _workers(pid: int) -> list[psutil.Process]:
    """The pool's worker processes (spawned children; not the resource tracker)."""
    out = []
    for child in psutil.Process(pid).children(recursive=True):
        cmd = " ".join(child.cmdline())
        if "spawn_main" in cmd and "resource_tracker" not in cmd:
            out.append(child)
    return out


def test_kill_9_of_one_worker_is_named_and_resume_completes(tmp_path, tfperf_exe):
    rng = np.random.default_rng(3)
    np.savez(
        tmp_path / "d.npz", x=rng.standard_normal((400, 16)).astype(np.float32), id=np.arange(400)
    )
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
    args = [tfperf_exe, "convert", "d.npz", "--out", "o", "--preprocess", "slowmod:slow"]
    args += ["--shard-size", "1KiB", "--workers", "2", "--quiet"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    progress = tmp_path / "o" / progress_name("d", "train")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists() and json.loads(progress.read_text())["shards"]:
            break
        time.sleep(0.02)
    workers = _workers(proc.pid)
    assert proc.poll() is None and len(workers) == 2, "convert ended before the kill"
    # Killed while it writes a shard (its temp file is there), not between two shards: a
    # worker killed between them has no shard to be named.
    while time.monotonic() < deadline and proc.poll() is None:
        if list((tmp_path / "o").glob(temp_name("d-train.tfrecord-*", workers[0].pid))):
            break
        time.sleep(0.005)
    os.kill(workers[0].pid, signal.SIGKILL)
    try:
        _, err = proc.communicate(timeout=60)  # before the fix: waits forever
    finally:
        if proc.poll() is None:
            proc.kill()
    text = " ".join(err.split())
    assert proc.returncode == 2, err
    assert f"worker process {workers[0].pid} was killed by signal SIGKILL" in text, err
    assert "while writing shard d-train.tfrecord-" in text and "--resume" in text, err
    assert "Traceback" not in err
    assert not _workers(proc.pid) if psutil.pid_exists(proc.pid) else True
    res = subprocess.run(
        [*args, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    ref = convert(tmp_path / "d.npz", tmp_path / "ref", shard_bytes=1024, workers=1, progress=False)
    assert len(ref.splits["train"].shards) > 5
    got = {p.name: p.read_bytes() for p in (tmp_path / "o").glob("d-train.tfrecord-*")}
    want = {p.name: p.read_bytes() for p in (tmp_path / "ref").glob("d-train.tfrecord-*")}
    assert got == want
    assert not [p.name for p in (tmp_path / "o").iterdir() if p.name.startswith(".")]


def test_a_dead_pool_process_is_named_with_its_shard_and_signal():
    """WorkerWatch on a real pool: a worker known to write shard 3 is killed; the check names
    it; a live pool passes the check."""
    pool = multiprocessing.get_context("spawn").Pool(1)
    try:
        watch = WorkerWatch(pool, {3: "d-train.tfrecord-00003-of-00009"})
        (pid,) = watch.procs
        watch.check("o", lambda: None)  # alive: nothing to say
        watch.started(3, pid)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while watch.procs[pid].exitcode is None and time.monotonic() < deadline:
            time.sleep(0.01)
        with pytest.raises(ConvertError) as err:
            watch.check("o", lambda: None)
        msg = str(err.value)
        assert msg.startswith(f"--out o: worker process {pid} was killed by signal SIGKILL")
        assert "while writing shard d-train.tfrecord-00003-of-00009" in msg and "dmesg" in msg
        watch.finished(3)
        assert watch.running == {}
        assert watch._text(pid, 1).endswith(
            "exited with code 1 while writing a shard it had just taken (no start notice yet)"
        )
    finally:
        pool.terminate()
