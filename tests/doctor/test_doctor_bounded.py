"""The doctor bounded and safe (issue 8, section 4) and its what-ifs honest (section 3):
a shuffle buffer or cache beyond the RAM budget is named from the graph and never filled
(a real `tfperf doctor` process watched with psutil), a slow pipeline stays within
`--budget` (in this process), Ctrl-C prints what was measured so far and exits 130 (a real
process), a pipeline that ignores `batch_size` gets no batch what-if. Each --fix trial's
predicted and measured gains: test_doctor_fix.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import psutil
import yaml

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Small probes: the budget tests are about wall time, not precision.
FAST = {"steps": 4, "warmup": 2, "repeats": 2, "min_seconds": 0.05, "what_ifs": []}
RAM_MB = 16  # the RAM budget of these run files: far below what the pipelines would hold
SLOW = {"steps": 12, "repeats": 3}  # the slow pipeline's probes: far more than the budgets
BUDGET = 10  # seconds: the slow pipeline's --budget (unbounded, its probes take ~45 s)

PIPELINES = '''"""User pipelines for test_doctor_bounded.py."""

import time

import keras
import numpy as np
import tensorflow as tf


def big_example(i):
    # 1 MiB per example, made on the fly: no data on disk.
    x = tf.fill([256, 1024], tf.cast(i % 7, tf.float32))
    return x, tf.reshape(tf.cast(i % 2, tf.float32), [1])


def huge_shuffle(batch_size=8, **kwargs):
    ds = tf.data.Dataset.range(4000).map(big_example)
    ds = ds.shuffle(200_000_000)  # 4 GiB if filled: far beyond the 16 MiB budget
    return ds.batch(batch_size)


def big_cache(batch_size=8, **kwargs):
    ds = tf.data.Dataset.range(2000).map(big_example).cache()  # 2 GiB
    return ds.shuffle(64).batch(batch_size)


def big_model():
    return keras.Sequential(
        [keras.Input((256, 1024)), keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)]
    )


def _nap(x):
    time.sleep(0.2)  # a slow per-batch step (e.g. a remote call)
    return x


def slow(batch_size=8, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(
        (np.ones([512, 32], "float32"), np.ones([512, 1], "float32"))
    )
    ds = ds.batch(batch_size)

    def step(x, y):
        x = tf.numpy_function(_nap, [x], tf.float32)
        x.set_shape([None, 32])
        return x, y

    return ds.map(step)


def hard_coded_64(batch_size=32, **kwargs):
    # A user pipeline that ignores batch_size: always batches of 64.
    ds = tf.data.Dataset.from_tensor_slices(
        (np.ones([1024, 32], "float32"), np.ones([1024, 1], "float32"))
    )
    return ds.map(lambda x, y: (x * 2.0, y)).batch(64, drop_remainder=True)


def per_example(batch_size=32, **kwargs):
    ds = tf.data.Dataset.from_tensor_slices(
        (np.ones([2048, 32], "float32"), np.ones([2048, 1], "float32"))
    )
    ds = ds.map(lambda x, y: (tf.math.log1p(tf.abs(x)) * 0.5, y))
    return ds.batch(batch_size)


def vector_model():
    return keras.Sequential([keras.Input((32,)), keras.layers.Dense(1)])
'''


def write_run(folder: Path, function: str, model: str, **extra: Any) -> Path:
    """`folder/<function>.yaml` naming `pipelines_bounded:<function>` and its model."""
    (folder / "pipelines_bounded.py").write_text(PIPELINES)
    run: dict[str, Any] = {
        "data": {"pipeline": f"pipelines_bounded:{function}"},
        "model": {"name": f"pipelines_bounded:{model}", "loss": "mse"},
        "pipeline": {"batch_size": 8, "shuffle_ram_mb": RAM_MB},
        "doctor": dict(FAST),
    }
    for key, value in extra.items():
        run[key].update(value)
    path = folder / f"{function}.yaml"
    path.write_text(yaml.safe_dump(run, sort_keys=False))
    return path


def start_doctor(run: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tfperf.cli.main", "doctor", str(run), *args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.Popen(
        cmd, cwd=run.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def watched(proc: subprocess.Popen, *, max_rss: int, max_seconds: float) -> tuple[str, float, int]:
    """Waits for `proc`, killing it beyond `max_rss` bytes of RSS or `max_seconds`:
    (stdout, seconds, peak RSS); a killed doctor is an AssertionError saying why."""
    start, peak = time.monotonic(), 0
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        took = time.monotonic() - start
        if peak > max_rss or took > max_seconds:
            proc.kill()  # only the process this test started
            proc.communicate()
            raise AssertionError(f"doctor killed after {took:.0f} s at {peak / 2**30:.2f} GiB RSS")
        time.sleep(0.1)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    return out, time.monotonic() - start, peak


def codes(diag: dict[str, Any]) -> list[str]:
    return [f["code"] for f in diag["findings"]]


def test_huge_shuffle_is_named_from_the_graph_and_never_filled(tmp_path: Path):
    run = write_run(tmp_path, "huge_shuffle", "big_model")
    proc = start_doctor(run, "--json", "--budget", "40")
    out, took, peak = watched(proc, max_rss=int(2.5 * 2**30), max_seconds=150)
    diag = json.loads(out)["diagnosis"]
    print(f"doctor: {took:.0f} s, peak RSS {peak / 2**30:.2f} GiB; {codes(diag)}")
    assert codes(diag)[0] == "shuffle_over_budget", codes(diag)
    assert "200,000,000 elements" in diag["findings"][0]["evidence"]
    assert any("timed with a buffer of" in n for n in diag["notes"]), diag["notes"]


def test_cache_over_budget_is_named_and_left_out_of_the_timed_copy(tmp_path: Path):
    run = write_run(tmp_path, "big_cache", "big_model", doctor={"steps": 30, "min_seconds": 1})
    proc = start_doctor(run, "--json", "--budget", "40")
    out, took, peak = watched(proc, max_rss=int(2.5 * 2**30), max_seconds=150)
    diag = json.loads(out)["diagnosis"]
    print(f"doctor: {took:.0f} s, peak RSS {peak / 2**30:.2f} GiB; {codes(diag)}")
    first = diag["findings"][0]
    assert first["code"] == "cache_over_budget", codes(diag)
    assert "2,000 elements" in first["evidence"] and first["kind"] == "risk"
    assert any("timed without the cache" in n for n in diag["notes"]), diag["notes"]
    # What the doctor holds beyond TensorFlow's own ~1 GiB: far less than the 2 GiB cache.
    assert peak < 1.8 * 2**30, peak


def test_a_slow_pipeline_stays_within_a_small_budget(tmp_path: Path, cli):
    # 0.2 s per batch: unbounded, these probes (every stage, 3 repeats of 2 + 12 steps) take
    # ~45 s and --fix's trials minutes.
    run = write_run(tmp_path, "slow", "vector_model", doctor=SLOW)
    start = time.monotonic()
    res = cli("doctor", run, "--json", "--budget", str(BUDGET))  # in this process: TF is loaded
    took = time.monotonic() - start
    assert res.exit_code == 0, res.output[-3000:]
    diag = json.loads(res.stdout)["diagnosis"]
    print(f"doctor --budget {BUDGET}: {took:.0f} s")
    # The budget covers the measuring; the warm-ups of the three required probes come on
    # top (generous for a loaded 2-core machine).
    assert took < BUDGET + 35, took
    assert diag["training"]["examples_per_s"] > 0
    not_measured = [s for s in diag["stages"] if s.get("error")] + [
        n for n in diag["notes"] if "time budget" in n
    ]
    print(not_measured)


def test_fix_on_a_slow_pipeline_stays_within_a_small_budget(tmp_path: Path, cli):
    run = write_run(tmp_path, "slow", "vector_model", doctor=SLOW)
    start = time.monotonic()
    res = cli("doctor", run, "--fix", "--json", "--budget", str(BUDGET))
    took = time.monotonic() - start
    assert res.exit_code == 0, res.output[-3000:]
    fix = json.loads(res.stdout)["fix"]
    print(f"doctor --fix --budget {BUDGET}: {took:.0f} s; trials:")
    for t in fix["trials"]:
        print(f"  {t['name']}: {t['reason']} (predicted {t['predicted']}, measured {t['ratio']})")
    # Each trial's warm-ups and the final check's come on top of the measuring budget.
    assert took < BUDGET + 65, took
    assert fix["trials"] and fix["speedup"] >= 1.0


def read_in_background(stream: IO[str]) -> list[str]:
    """What `stream` gives, character by character, as it comes (a thread reads it)."""
    seen: list[str] = []

    def read() -> None:
        for ch in iter(lambda: stream.read(1), ""):
            seen.append(ch)

    threading.Thread(target=read, daemon=True).start()  # ends with the stream
    return seen


def test_ctrl_c_prints_what_was_measured_and_exits_130(tmp_path: Path):
    run = write_run(tmp_path, "slow", "vector_model", doctor=SLOW)
    # rich draws its progress line for a terminal only: each probe's name as it starts
    proc = start_doctor(run, "--budget", "300", env={"TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
    err = read_in_background(proc.stderr)
    # once a probe after the pipeline starts, the pipeline's first repeat was measured
    end = time.monotonic() + 240
    try:
        while not re.search(r"measuring (compute limit|training)", "".join(err)):
            assert proc.poll() is None and time.monotonic() < end, "".join(err)[-3000:]
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)  # the process this test started
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()  # only the process this test started
    out = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", proc.stdout.read())  # escape codes
    assert proc.returncode == 130, (out, "".join(err)[-2000:])
    assert "interrupted: measured so far" in out, (out, "".join(err)[-2000:])
    assert "pipeline:" in out and "ex/s" in out, out


def test_a_pipeline_that_ignores_batch_size_gets_no_batch_what_if(tmp_path: Path):
    from tfperf.config import load_config
    from tfperf.doctor import diagnose

    run = write_run(tmp_path, "hard_coded_64", "vector_model", doctor={"what_ifs": ["batch"]})
    diag = diagnose(load_config(run)).to_dict()
    assert diag["batch_size"] == 64  # the elements' leading dimension, not batch_size: 8
    assert not [v for v in diag["variants"] if "batch=" in v], diag["variants"]
    assert "small_batch" not in codes(diag)
    assert any("ignores batch_size" in n for n in diag["notes"]), diag["notes"]
