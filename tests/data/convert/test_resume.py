"""data/convert/resume.py: `convert --resume` after `kill -9` writes byte-identical shards,
none lost or duplicated; resuming a finished split verifies it (a damaged shard is
rewritten); an interrupted run resumes only with the same options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import load_manifest
from tfperf.data.shards import progress_name

from helpers.convertkit import read_back, shard_bytes_of

SLOW_MODULE = """
import time
def slow(row):
    time.sleep(0.01)
    return row
"""


def test_kill_9_then_resume_is_exact(tmp_path, tfperf_exe):
    rng = np.random.default_rng(7)
    np.savez(
        tmp_path / "d.npz", x=rng.standard_normal((400, 16)).astype(np.float32), id=np.arange(400)
    )
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
    args = [
        tfperf_exe,
        "convert",
        "d.npz",
        "--out",
        "crashed",
        "--preprocess",
        "slowmod:slow",
        "--shard-size",
        "1KiB",
        "--workers",
        "2",
        "--quiet",
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    progress = tmp_path / "crashed" / progress_name("d", "train")
    done, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists():
            done = len(json.loads(progress.read_text())["shards"])
            if done >= 1:
                break
        time.sleep(0.02)
    assert proc.poll() is None, f"convert ended before it could be killed: {proc.stderr.read()}"
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its worker processes
    proc.wait()
    state = json.loads(progress.read_text())
    total = len(state["plan"]["bounds"]) - 1
    assert 1 <= len(state["shards"]) < total  # killed midway
    assert not (tmp_path / "crashed" / "manifest.json").exists()
    res = subprocess.run(
        [*args, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    # the uninterrupted reference run (same rows: the preprocess is the identity)
    ref = convert(tmp_path / "d.npz", tmp_path / "ref", shard_bytes=1024, workers=1, progress=False)
    got = load_manifest(tmp_path / "crashed")
    assert len(ref.splits["train"].shards) == total
    assert got.splits["train"].shards == ref.splits["train"].shards
    assert got.splits["train"].records == 400
    assert shard_bytes_of(tmp_path / "crashed") == shard_bytes_of(tmp_path / "ref")
    ids = [r["id"].item() for r in read_back(tmp_path / "crashed")]
    assert ids == list(range(400))  # none lost, none duplicated
    leftovers = [p.name for p in (tmp_path / "crashed").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_resume_checks_options_and_finished_splits(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.arange(50))
    convert(tmp_path / "d.npz", tmp_path / "o", shard_bytes=200, workers=1, progress=False)
    before = shard_bytes_of(tmp_path / "o")
    # resuming a finished split verifies it and changes nothing
    m = convert(
        tmp_path / "d.npz", tmp_path / "o", shard_bytes=200, workers=1, progress=False, resume=True
    )
    assert shard_bytes_of(tmp_path / "o") == before and m.splits["train"].records == 50
    # a damaged shard of a finished split is rewritten by --resume
    victim = sorted((tmp_path / "o").glob("d-train.tfrecord-*"))[1]
    victim.write_bytes(victim.read_bytes()[:-3])
    convert(
        tmp_path / "d.npz", tmp_path / "o", shard_bytes=200, workers=1, progress=False, resume=True
    )
    assert shard_bytes_of(tmp_path / "o") == before
    # an interrupted run can only be resumed with the same options
    progress = tmp_path / "o" / progress_name("d", "train")
    state = {
        "format": "tfperf.progress/1",
        "plan": {"num_rows": 50, "records_per_shard": 50, "bounds": [0, 50]},
        "shards": {},
        "fingerprint": {"source": "elsewhere.npz", "rows": 50},
    }
    progress.write_text(json.dumps(state))
    with pytest.raises(ConvertError, match="cannot resume: source, schema"):
        convert(tmp_path / "d.npz", tmp_path / "o", workers=1, progress=False, resume=True)
