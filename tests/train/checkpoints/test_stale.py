"""The temporaries a killed writer leaves (checkpoints/stale.py): a kill -9 mid-save leaves
TF's ckpt-N_temp folder (and the evaluator its .best.tmp-PID). `remove_stale` removes the
dead writers' own and nothing else, TF's only when the caller holds train.out_dir or no live
process does; the next `train` (holding it) and `evaluate --watch` (beside a live trainer,
then once that trainer is gone) clean up accordingly, through the command line in this
process (which plays the live trainer; its parent, a live evaluator)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfperf.train.checkpoints.stale import remove_stale
from tfperf.util.lock import folder_lock

from helpers import trainkit

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
        "live_best": run / f".best.tmp-{os.getppid()}",  # a live evaluator's: kept
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


def test_remove_stale_leaves_checkpoint_temps_to_a_live_holder(tmp_path):
    run = tmp_path / "run"
    made = _leftovers(run, run / "checkpoints", _dead_pid())
    with folder_lock(run, "tfperf train"):  # a live process (this one) holds train.out_dir
        gone = remove_stale(run, run / "checkpoints", holding=False)
        assert sorted(gone) == sorted([made["best_temp"], made["best_old"]])
        gone += remove_stale(run, run / "checkpoints", holding=True)  # the holder itself
    assert {n for n, p in made.items() if p.exists()} == KEPT
    assert sorted(gone) == sorted(p for n, p in made.items() if n not in KEPT)
    assert remove_stale(run, run / "checkpoints", holding=False) == []  # nothing left


@pytest.mark.slow  # real training
def test_train_removes_stale_temporaries_of_dead_writers_only(tmp_path):
    rf = _run(tmp_path)
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    run = tmp_path / "run"
    made = _leftovers(run, run / "checkpoints", _dead_pid())
    proc = trainkit.tfperf_here("train", str(rf), "--no-progress", "--max-steps", "8")
    assert {n for n, p in made.items() if p.exists()} == KEPT
    assert f"removed {made['tf_temp']}" in proc.stderr.replace("\n", "")


@pytest.mark.slow  # real training and evaluating
def test_watch_leaves_checkpoint_temps_to_a_live_trainer(tmp_path):
    rf = _run(tmp_path)
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    run = tmp_path / "run"
    made = _leftovers(run, run / "checkpoints", _dead_pid())
    args = ("evaluate", str(rf), "--watch", "--poll", "0.1", "--timeout", "60", *EVAL)
    with folder_lock(run, "tfperf train"):  # this live process holds train.out_dir
        trainkit.tfperf_here(*args)
        # The evaluator's own dead temporaries go; the trainer's folder is left alone.
        gone = {n for n, p in made.items() if not p.exists()}
        assert gone == {"best_temp", "best_old"}
    trainkit.tfperf_here(*args)  # nobody holds it now: TF's temporaries are stale too
    assert {n for n, p in made.items() if p.exists()} == KEPT
