"""data/convert/lock.py: an --out that cannot be written (a file, or under one) is one
paragraph; a failed convert removes the empty folders it made and nothing else; and two
`tfperf convert` processes into one --out at the same time: different splits both end up in
manifest.json (it is re-read and merged under a lock), the same split is refused by the
second with the first's PID."""

from __future__ import annotations

import json
import os
import subprocess
import time

import numpy as np
import pytest

from tfperf.data.convert.lock import (
    MANIFEST_LOCK,
    make_out,
    manifest_lock,
    remove_made,
    split_lock,
    split_lock_name,
)
from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import load_manifest
from tfperf.data.shards import progress_name
from tfperf.data.verify import verify_dir
from tfperf.util.lock import read_holder

from helpers.convertkit import one_paragraph

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


def test_out_is_a_file_or_under_a_file(data, cli):
    (data / "taken").write_text("a file, not a folder")
    res = cli("convert", "d.npz", "--out", "taken", "--quiet")
    msg = one_paragraph(res)
    assert "--out taken: cannot write the dataset there" in msg and "a file" in msg, msg
    res = cli("convert", "d.npz", "--out", "taken/sub/dir", "--quiet")
    msg = one_paragraph(res)
    assert "--out taken/sub/dir" in msg and "taken is a file" in msg, msg
    assert (data / "taken").read_text() == "a file, not a folder"


def test_a_failed_convert_removes_only_the_empty_folders_it_made(data):
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "new" / "deeper" / "o", preprocess="boom_prep:always")
    assert not (data / "new").exists()
    # a failure while writing, before any shard was finished: nothing to resume from
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "new" / "o", preprocess="boom_prep:late", workers=1)
    assert not (data / "new").exists()
    (data / "kept").mkdir()
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "kept" / "o", preprocess="boom_prep:always")
    assert (data / "kept").is_dir() and not (data / "kept" / "o").exists()
    (data / "busy").mkdir()
    (data / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "busy", preprocess="boom_prep:always")
    assert sorted(p.name for p in (data / "busy").iterdir()) == ["notes.txt"]


def test_make_out_returns_the_folders_it_made_deepest_first(tmp_path):
    out = tmp_path / "a" / "b"
    assert make_out(out) == [out, tmp_path / "a"] and out.is_dir()
    assert make_out(out) == []  # already there: nothing made
    (out / "f").write_text("x")
    remove_made([out, tmp_path / "a"])  # not empty: both stay
    assert out.is_dir()


def test_the_lock_folders_are_held_then_removed(tmp_path):
    with split_lock(tmp_path, "train"):
        holder = read_holder(tmp_path / split_lock_name("train"))
        assert holder.pid == os.getpid() and holder.purpose == "tfperf convert --split train"
        with manifest_lock(tmp_path):
            assert read_holder(tmp_path / MANIFEST_LOCK).purpose == "tfperf convert"
        assert not (tmp_path / MANIFEST_LOCK).exists()
    assert list(tmp_path.iterdir()) == []
