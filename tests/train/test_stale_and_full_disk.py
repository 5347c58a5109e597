"""What a killed save or a full disk leaves: a kill -9 mid-save leaves TF's ckpt-N_temp
folder (and the evaluator its .best.tmp-PID): the next `train` (holding train.out_dir) or
`evaluate --watch` (only when no live process holds it) removes ours and nothing else. A
full disk is one error naming the path and the free space, exit 2, nothing partial left.
The watcher beside a live trainer runs as its own process (this process plays the trainer
and a live evaluator); the rest, the watcher once that trainer is gone included, through the
command line in this process. The full disk is
a real tmpfs (skipped where mounting is not permitted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfperf.util.lock import folder_lock

from helpers import trainkit

pytestmark = pytest.mark.slow  # real training and evaluating

EVAL = ("--set", "data.eval_split=train")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _run(tmp_path: Path, **train) -> Path:
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    return trainkit.write_runfile(
        tmp_path, data, max_steps=6, steps_per_loop=1, checkpoint={"every_steps": 2}, **train
    )


def _leftovers(run: Path, ckpts: Path, dead: int) -> dict[str, Path]:
    """What killed writers leave, and entries that are not ours (kept)."""
    made = {
        "tf_temp": ckpts / "ckpt-8_temp",
        "state_temp": ckpts / ("checkpoint.tmp" + "a" * 32),
        "final_temp": ckpts / f".FINAL.tmp-{dead}",
        "best_temp": run / f".best.tmp-{dead}",
        "best_old": run / f".best.old-{dead}",
        "live_best": run / f".best.tmp-{os.getpid()}",  # a live evaluator's: kept
        "not_ours": ckpts / "ckpt-8_temp.mine",
        "user_file": run / "notes.tmp",
    }
    for name, p in made.items():
        if name in ("tf_temp", "best_temp", "best_old", "live_best"):
            p.mkdir(parents=True)
            (p / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x" * 100)
        else:
            p.write_text("x")
    return made


KEPT = {"live_best", "not_ours", "user_file"}


def test_train_removes_stale_temporaries_of_dead_writers_only(tmp_path):
    rf = _run(tmp_path)
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    run = tmp_path / "run"
    made = _leftovers(run, run / "checkpoints", _dead_pid())
    proc = trainkit.tfperf_here("train", str(rf), "--no-progress", "--max-steps", "8")
    assert {n for n, p in made.items() if p.exists()} == KEPT
    assert f"removed {made['tf_temp']}" in proc.stderr.replace("\n", "")


def test_watch_leaves_checkpoint_temps_to_a_live_trainer(tmp_path):
    rf = _run(tmp_path)
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    run = tmp_path / "run"
    made = _leftovers(run, run / "checkpoints", _dead_pid())
    args = ("evaluate", str(rf), "--watch", "--poll", "0.1", "--timeout", "60", *EVAL)
    with folder_lock(run, "tfperf train"):  # this live process holds train.out_dir
        trainkit.tfperf(*args)
        # The evaluator's own dead temporaries go; the trainer's folder is left alone.
        gone = {n for n, p in made.items() if not p.exists()}
        assert gone == {"best_temp", "best_old"}
    trainkit.tfperf_here(*args)  # nobody holds it now: TF's temporaries are stale too
    assert {n for n, p in made.items() if p.exists()} == KEPT


def _fill(folder: Path, leave: int) -> None:
    import shutil

    free = shutil.disk_usage(folder).free
    (folder / "filler").write_bytes(b"\0" * max(0, free - leave))


def _one_error(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return stderr[stderr.index("error:") :].replace("\n", "")


def test_full_disk_on_save_is_one_error_naming_path_and_free_space(tmp_path, tmpfs):
    rf = _run(tmp_path)
    ckpts = tmpfs("run/checkpoints", "64k")
    _fill(ckpts, 8192)
    proc = trainkit.tfperf_here("train", str(rf), "--no-progress", check=False)
    assert proc.returncode == 2, proc.stderr
    err = _one_error(proc.stderr)
    assert f"the disk holding {ckpts} is full" in err and "KiB free" in err
    assert sorted(p.name for p in ckpts.iterdir()) == ["filler"]  # no partial ckpt-2_temp


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
