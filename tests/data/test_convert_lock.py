"""Two `tfperf convert` processes into one --out at the same time: different splits both end
up in manifest.json (it is re-read and merged under a lock), the same split is refused by
the second with the first's PID."""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np

from tfperf.data.manifest import load_manifest
from tfperf.data.shards import progress_name
from tfperf.data.verify import verify_dir

# Slow enough that both processes are converting at once (each takes several seconds).
SLOW = "import time\ndef slow(row):\n    time.sleep(0.04)\n    return row\n"


def _convert(exe: str, cwd, source: str, split: str, *extra: str) -> subprocess.Popen:
    args = [exe, "convert", source, "--out", "o", "--name", "d", "--split", split]
    args += ["--preprocess", "slow_rows:slow", "--workers", "1", "--quiet", *extra]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _data(tmp_path) -> None:
    (tmp_path / "slow_rows.py").write_text(SLOW)
    np.savez(tmp_path / "a.npz", x=np.arange(100, dtype=np.int64))
    np.savez(tmp_path / "b.npz", x=np.arange(1000, 1080, dtype=np.int64))


def test_two_converts_of_different_splits_keep_both_splits(tmp_path, tfperf_exe):
    _data(tmp_path)
    procs = [
        _convert(tfperf_exe, tmp_path, "a.npz", "train"),
        _convert(tfperf_exe, tmp_path, "b.npz", "eval"),
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    m = load_manifest(tmp_path / "o")
    assert {k: v.records for k, v in m.splits.items()} == {"train": 100, "eval": 80}
    assert verify_dir(tmp_path / "o", m).ok
    leftovers = sorted(p.name for p in (tmp_path / "o").iterdir() if p.name.startswith("."))
    assert leftovers == []  # no lock or progress files stay behind


def test_a_second_convert_of_the_same_split_is_refused_with_the_first_pid(tmp_path, tfperf_exe):
    _data(tmp_path)
    first = _convert(tfperf_exe, tmp_path, "a.npz", "train")
    progress = tmp_path / "o" / progress_name("d", "train")
    deadline = time.monotonic() + 120
    while not progress.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert first.poll() is None, first.communicate()
    second = _convert(tfperf_exe, tmp_path, "b.npz", "train")
    out, err = second.communicate(timeout=300)
    assert second.returncode == 2, (out, err)
    msg = " ".join(err.split())
    assert f"split 'train' is in use by PID {first.pid} on " in msg and " since " in msg, msg
    assert "Traceback" not in err
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    m = load_manifest(tmp_path / "o")
    assert m.splits["train"].records == 100 and verify_dir(tmp_path / "o", m).ok
    got = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert list(got["splits"]) == ["train"]
