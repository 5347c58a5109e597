"""data/convert/resume.py: `convert --resume` after `kill -9` writes byte-identical shards,
none lost or duplicated; resuming a finished split verifies it (a damaged shard is
rewritten); an interrupted run resumes only with the same options, and refuses what would
mix data: a source whose content changed since the interrupted run (same path and shape), a
changed image folder, another --shard-size or another --name; each refusal names what
changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
from PIL import Image

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


_CALLS = [0]


def fail_late(row):
    """Fails at its FAIL_AT-th row (env) so that a run stops with some shards finished."""
    _CALLS[0] += 1
    if 0 <= int(os.environ.get("FAIL_AT", "-1")) <= _CALLS[0]:
        raise ValueError("stopped on purpose")
    return row


def _interrupted(tmp_path, monkeypatch, source, **kw):
    monkeypatch.setenv("FAIL_AT", "60")
    _CALLS[0] = 0
    with pytest.raises(ConvertError):
        convert(source, tmp_path / "o", workers=1, progress=False, preprocess=fail_late, **kw)
    assert list((tmp_path / "o").glob(".*.progress.json"))
    monkeypatch.setenv("FAIL_AT", "-1")


def _resume(tmp_path, source, **kw):
    """`convert --resume` of `source` into tmp_path/o, with _interrupted's preprocess."""
    return convert(
        source, tmp_path / "o", workers=1, progress=False, preprocess=fail_late, resume=True, **kw
    )


def _npz(path, seed):
    rng = np.random.default_rng(seed)
    np.savez(path, id=np.arange(100), x=rng.random((100, 4)).astype(np.float32))


def test_resume_refuses_a_changed_source(tmp_path, monkeypatch):
    _npz(tmp_path / "d.npz", 0)
    _interrupted(tmp_path, monkeypatch, tmp_path / "d.npz", shard_bytes=400)
    _npz(tmp_path / "d.npz", 1)  # same path, size and shape; other values
    with pytest.raises(ConvertError) as err:
        _resume(tmp_path, tmp_path / "d.npz", shard_bytes=400)
    msg = str(err.value)
    assert "cannot resume: content differ" in msg and "its content changed" in msg, msg
    assert str(tmp_path / "d.npz") in msg


def test_resume_refuses_another_shard_size_and_another_name(tmp_path, monkeypatch):
    _npz(tmp_path / "d.npz", 0)
    _interrupted(tmp_path, monkeypatch, tmp_path / "d.npz", shard_bytes=400)
    with pytest.raises(ConvertError, match="--shard-size was 400 bytes, now 800"):
        _resume(tmp_path, tmp_path / "d.npz", shard_bytes=800)
    with pytest.raises(ConvertError, match="is named 'd', not 'other'; resume with --name d"):
        _resume(tmp_path, tmp_path / "d.npz", shard_bytes=400, name="other")
    m = _resume(tmp_path, tmp_path / "d.npz", shard_bytes=400)
    assert m.splits["train"].records == 100


def test_resume_refuses_a_changed_image_folder(tmp_path, monkeypatch):
    root = tmp_path / "imgs"
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for j in range(60):
            Image.new("RGB", (4, 4), (j, 0, 0)).save(root / label / f"{j}.png")
    _interrupted(tmp_path, monkeypatch, root, shard_bytes=2000, image_size=(4, 4))
    Image.new("RGB", (4, 4), (9, 9, 9)).save(root / "a" / "0.png")  # replaced, same name
    with pytest.raises(ConvertError, match="the folder's files changed"):
        _resume(tmp_path, root, shard_bytes=2000, image_size=(4, 4))
