"""A full disk while saving (checkpoints/disk_full.py): TensorFlow's error or an OSError
(ENOSPC) becomes one DiskFullError naming the path, the free space there and what the last
checkpoint took; other errors pass as they are. The function level on /dev/full's real
ENOSPC; `tfperf train` and `evaluate --watch` (through the command line in this process) on a
real full tmpfs: one error, exit 2, nothing partial left (skipped where mounting is not
permitted)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfperf.train.checkpoints.disk_full import (
    DiskFullError,
    disk_full_named,
    newest_checkpoint_bytes,
)
from tfperf.util.disk import NO_SPACE, size_text

from helpers import trainkit

EVAL = ("--set", "data.eval_split=train")


def _checkpoint_files(folder: Path, step: int, sizes: tuple[int, int], mtime: float) -> None:
    names = (f"ckpt-{step}.index", f"ckpt-{step}.data-00000-of-00001")
    for name, size in zip(names, sizes, strict=True):
        (folder / name).write_bytes(b"x" * size)
        os.utime(folder / name, (mtime, mtime))


def test_newest_checkpoint_bytes_sums_the_newest_checkpoints_files(tmp_path):
    assert newest_checkpoint_bytes(tmp_path / "missing") is None
    assert newest_checkpoint_bytes(tmp_path) is None  # no checkpoint yet
    _checkpoint_files(tmp_path, 2, (100, 900), mtime=1_000)
    _checkpoint_files(tmp_path, 4, (120, 3_000), mtime=2_000)
    (tmp_path / "checkpoint").write_bytes(b"x" * 50_000)  # not a ckpt-N file
    assert newest_checkpoint_bytes(tmp_path) == 3_120


def _fill_dev_full() -> None:
    """A real ENOSPC: every write to /dev/full fails for space."""
    with open("/dev/full", "w") as f:
        f.write("x")


def test_a_full_disk_in_the_body_is_one_error_naming_path_space_and_last_checkpoint(tmp_path):
    _checkpoint_files(tmp_path, 2, (1_000, 9_240), mtime=1_000)
    with pytest.raises(DiskFullError) as err:
        with disk_full_named("saving a checkpoint", tmp_path, "lower checkpoint.keep"):
            _fill_dev_full()
    text = str(err.value)
    assert text.startswith(f"saving a checkpoint: the disk holding {tmp_path} is full (")
    assert "free of" in text and NO_SPACE in text
    assert f"the last checkpoint there took {size_text(10_240)}" in text  # 10.0 KiB
    assert text.endswith("free space there, or lower checkpoint.keep")
    assert err.value.__cause__ is None  # one paragraph, not a chain


def test_other_errors_pass_unchanged(tmp_path):
    with pytest.raises(PermissionError):
        with disk_full_named("saving a checkpoint", tmp_path, "fix"):
            raise PermissionError(13, "Permission denied", str(tmp_path))
    with disk_full_named("saving a checkpoint", tmp_path, "fix"):
        (tmp_path / "written").write_text("ok")  # no error: nothing happens
    assert (tmp_path / "written").read_text() == "ok"


def _run(tmp_path: Path, **train) -> Path:
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    return trainkit.write_runfile(
        tmp_path, data, max_steps=6, steps_per_loop=1, checkpoint={"every_steps": 2}, **train
    )


def _fill(folder: Path, leave: int) -> None:
    import shutil

    free = shutil.disk_usage(folder).free
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave))


def _one_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return stderr[stderr.index("error:") :].replace("\n", "")


@pytest.mark.slow  # real training (and evaluating)
def test_full_disk_on_save_is_one_error_naming_path_and_free_space(tmp_path, tmpfs):
    rf = _run(tmp_path)
    ckpts = tmpfs("run/checkpoints", "64k")
    _fill(ckpts, 8192)
    proc = trainkit.tfperf_here("train", str(rf), "--no-progress", check=False)
    assert proc.returncode == 2, proc.stderr
    err = _one_error(proc.stderr)
    assert f"the disk holding {ckpts} is full" in err and "KiB free" in err
    assert sorted(p.name for p in ckpts.iterdir()) == ["filler"]  # no partial ckpt-2_temp


@pytest.mark.slow  # real training (and evaluating)
def test_full_disk_in_the_evaluator_is_one_error(tmp_path, tmpfs):
    rf = _run(tmp_path)
    run = tmpfs("run", "2m")
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    _fill(run, 4096)
    args = ("evaluate", str(rf), "--watch", "--poll", "0.1", "--timeout", "60", *EVAL)
    proc = trainkit.tfperf_here(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"the disk holding {run} is full" in _one_error(proc.stderr)
    assert not [p for p in run.iterdir() if p.name.startswith(".best")]  # no partial best/
