"""train.checkpoint_input: false with a fixed pipeline.seed: a resume restarts the input,
seeded with pipeline.seed + the resumed step, so that resumes from different steps read
different first batches instead of replaying the first run's; a fresh run with the same
seed still reads exactly the same batches (reproducible). `tfperf train` through its
command line in this process (no TensorFlow start-up per run); the model logs each step's
example ids."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import trainkit

pytestmark = pytest.mark.slow  # real training


def _train(rf: Path, out: str, max_steps: int, log: Path) -> str:
    args = ("train", str(rf), "--no-progress", "--max-steps", str(max_steps))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IDS_LOG", str(log))  # read by the model at each step
        return trainkit.tfperf_here(*args, "--set", f"train.out_dir={out}").stderr


def _batches(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_resumes_without_input_checkpoint_read_other_batches(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    rf = trainkit.write_runfile(
        tmp_path,
        data,
        model="tinymodels:with_ids",
        steps_per_loop=1,
        checkpoint_input=False,
        checkpoint={"every_steps": 2},
    )
    # deterministic: the parallel reads keep their order, so one seed gives one order.
    rf.write_text(rf.read_text().replace("seed: 1", "seed: 1\n  deterministic: true"))
    run, again = str(tmp_path / "run"), str(tmp_path / "again")
    logs = {k: tmp_path / f"{k}.txt" for k in ("first", "fresh", "resume2", "resume4")}
    _train(rf, run, 2, logs["first"])
    _train(rf, again, 2, logs["fresh"])
    assert _batches(logs["fresh"]) == _batches(logs["first"])  # same seed: same batches
    err = _train(rf, run, 4, logs["resume2"])
    _train(rf, run, 6, logs["resume4"])
    firsts = [_batches(logs[k])[:2] for k in ("first", "resume2", "resume4")]
    assert all(len(f) == 2 for f in firsts)
    assert firsts[0] != firsts[1] and firsts[0] != firsts[2] and firsts[1] != firsts[2]
    assert os.path.exists(f"{run}/checkpoints/ckpt-6.index")
    assert "seeded with pipeline.seed + step = 1 + 2 = 3" in err.replace("\n", " ")  # said once
