"""Exact resume: a run killed (kill -9, or SIGTERM) or stopped by max_steps at arbitrary
steps and restarted consumes every example of every epoch exactly once, counting only what
was consumed up to each restored checkpoint. The model logs the ids of each step's batch to
a file.

An interrupted `tfperf train` (SIGTERM here, with --json; SIGINT without it in
test_out_dir_lock.py) says it saves its checkpoint with the input iterator and how large
that is, saves it and exits 128 + the signal's number (143, 130), so that a script tells it
from a finished run; --json still says stopped_because: signal. Asserted on the resume
test's SIGTERM'd process: the same real process, paying TensorFlow's start-up once for
both proofs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import trainkit

EXAMPLES, BATCH, EPOCHS = 48, 4, 3


def _lines(path: Path) -> list[list[int]]:
    if not path.exists():
        return []
    return [[int(t) for t in line.split()] for line in path.read_text().splitlines() if line]


def _latest_step(ckpt_dir: Path) -> int:
    state = ckpt_dir / "checkpoint"
    if not state.exists():
        return 0
    first = state.read_text().splitlines()[0]  # model_checkpoint_path: "ckpt-N"
    return int(first.split('"')[1].rsplit("-", 1)[1])


def _start(rf: Path, log: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "IDS_LOG": str(log), "IDS_PAUSE": "0.08"}
    return subprocess.Popen(
        [sys.executable, "-m", "tfperf.cli.main", "train", str(rf), "--no-progress", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(rf: Path, log: Path, in_process: bool, *args: str) -> str:
    """The last, uninterrupted run to its end (or to what `args` say); its stderr. In this
    process (through the command line) where the strategy allows: TensorFlow's devices are
    set up once per process, so the mirrored run's 2 logical CPUs need a process of their
    own."""
    if not in_process:
        final = _start(rf, log)
        _, err = final.communicate(timeout=240)
        assert final.returncode == 0, err
        return err
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IDS_LOG", str(log))
        return trainkit.tfperf_here("train", rf, "--no-progress", *args).stderr


def _interrupt_after(proc: subprocess.Popen, log: Path, lines: int, sig: int) -> tuple[str, str]:
    deadline = time.monotonic() + 120
    while len(_lines(log)) < lines:
        assert proc.poll() is None, f"finished early:\n{proc.stderr.read()}"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.01)
    proc.send_signal(sig)
    return proc.communicate(timeout=120)


def _assert_saved_and_exited_143(proc: subprocess.Popen, out: str, err: str, ckpt_dir: Path):
    """The SIGTERM'd `tfperf train --json`: said what it saves and how large, saved (not
    FINAL), exited 143, its JSON saying why it stopped."""
    assert proc.returncode == 143, err
    assert sorted(p.name for p in ckpt_dir.glob("ckpt-*.index")), err
    # It says what the save holds and how large: a big shuffle buffer takes seconds. Here
    # after a checkpoint (step 3), its size; before any, the shuffle buffer's estimate (the
    # SIGINT'd trainer of test_out_dir_lock.py).
    assert re.search(r"SIGTERM: saving a checkpoint at step \d+ with the input iterator \(", err)
    assert re.search(r"\(~[\d.]+ (KiB|MiB), as large as the last checkpoint\)", err), err
    assert not (ckpt_dir / "FINAL").exists()
    result = json.loads(out)
    assert result["stopped_because"] == "signal" and result["signal"] == "SIGTERM"
    assert Path(result["checkpoint"] + ".index").exists()


@pytest.mark.slow  # one or two real training processes each
@pytest.mark.parametrize(
    ("strategy", "replicas", "shards", "plan"),
    [
        # (steps to wait for, signal): kill -9 between checkpoints; then (None) a restored run
        # in this process stopped by max_steps mid-epoch (it saves as a signal's stop does),
        # restored in turn: two restarts in a row, one training process (TensorFlow's start-up
        # paid once; SIGTERM's save and exit are the mirrored case's).
        ("one_device", 1, 3, [(5, signal.SIGKILL), (4, None)]),
        # mirrored on 2 logical CPUs: one pipeline and one saved iterator per replica. One
        # SIGTERM mid-epoch (step 4 of 6, after the step-3 checkpoint): its save holds both
        # replicas' iterators where they stopped; kill -9's restore of an older checkpoint is
        # the same restore, proven above (a process fewer: each pays TensorFlow's start-up).
        ("mirrored", 2, 2, [(4, signal.SIGTERM)]),
    ],
)
def test_kill_and_restart_consumes_each_example_exactly_once_per_epoch(
    tmp_path, strategy, replicas, shards, plan
):
    data = trainkit.write_data(tmp_path / "data", n=EXAMPLES, shards=shards)
    rf = trainkit.write_runfile(
        tmp_path,
        data,
        model="tinymodels:with_ids",
        epochs=EPOCHS,
        steps_per_loop=1,
        checkpoint={"every_steps": 3},
        strategy=strategy,
        devices=replicas,
    )
    rf.write_text(rf.read_text().replace("batch_size: 8", f"batch_size: {BATCH}"))
    ckpt_dir = tmp_path / "run" / "checkpoints"
    per_epoch = EXAMPLES // (BATCH * replicas)
    history: list[list[int]] = []  # one line per replica and step
    start = 0
    for k, (steps, sig) in enumerate(plan):
        log = tmp_path / f"ids_{k}.txt"
        if sig is None:
            _finish(rf, log, True, "--max-steps", str(start + steps))
        else:
            json_out = ["--json"] if sig == signal.SIGTERM else []  # the exit contract's output
            proc = _start(rf, log, *json_out)
            out, err = _interrupt_after(proc, log, steps * replicas, sig)
        restored = _latest_step(ckpt_dir)
        consumed = _lines(log)
        if sig == signal.SIGTERM:
            _assert_saved_and_exited_143(proc, out, err, ckpt_dir)
        if sig != signal.SIGKILL:
            assert restored * replicas == start * replicas + len(consumed)  # saved where it stopped
        assert start <= restored <= start + len(consumed) // replicas
        history += consumed[: (restored - start) * replicas]  # what the restored state consumed
        start = restored
    log = tmp_path / "ids_final.txt"
    err = _finish(rf, log, in_process=replicas == 1)
    assert f"resumed from {ckpt_dir}" in err.replace("\n", "")
    history += _lines(log)
    assert len(history) == EPOCHS * per_epoch * replicas
    assert all(len(batch) == BATCH for batch in history)
    lines = per_epoch * replicas
    for e in range(EPOCHS):
        ids = sorted(i for batch in history[e * lines : (e + 1) * lines] for i in batch)
        assert ids == list(range(1, EXAMPLES + 1)), f"epoch {e}"
    assert (ckpt_dir / "FINAL").exists()
    # Shuffled: the epochs do not repeat one order.
    orders = [sum(history[e * lines : (e + 1) * lines], []) for e in range(2)]
    assert orders[0] != orders[1]


def test_without_iterator_checkpoint_the_epoch_restarts(tmp_path):
    """checkpoint_input: false keeps model and step but not the input position: after a
    restart the consumed ids no longer form exact epochs (why the iterator is saved). Both
    runs in this process: a stop at max_steps mid-epoch saves as a signal's stop does, and
    the restart restores that checkpoint (the signals are the test above's)."""
    data = trainkit.write_data(tmp_path / "data", n=EXAMPLES, shards=3)
    rf = trainkit.write_runfile(
        tmp_path,
        data,
        model="tinymodels:with_ids",
        epochs=1,
        steps_per_loop=1,
        checkpoint_input=False,
        checkpoint={"every_steps": 3},
    )
    rf.write_text(rf.read_text().replace("batch_size: 8", f"batch_size: {BATCH}"))
    log = tmp_path / "ids_0.txt"
    _finish(rf, log, True, "--max-steps", "6")  # half of the epoch's 12 steps
    restored = _latest_step(tmp_path / "run" / "checkpoints")
    assert restored == 6
    history = _lines(log)[:restored]
    _finish(rf, tmp_path / "ids_1.txt", in_process=True)
    history += _lines(tmp_path / "ids_1.txt")
    ids = sorted(i for batch in history for i in batch)
    assert len(history) == EXAMPLES // BATCH
    assert ids != list(range(1, EXAMPLES + 1))  # some ids twice, some never
