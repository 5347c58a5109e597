"""Two `tfperf train` on one train.out_dir: the first a real process, the second (this one,
through the command line) is refused with the first one's PID and start time and writes
nothing; an evaluator watching the same folder by hand is not refused; the lock goes when
the first one ends. The first one is ended by SIGINT (Ctrl-C) without --json: it is also
the interrupted run's SIGINT case (says what it saves, saves, exits 130; SIGTERM's, with
--json, is in test_resume.py), one process paying TensorFlow's start-up for both."""

from __future__ import annotations

import re
import signal
import time

import pytest

from tfperf.util.lock import LOCK_NAME

from helpers import trainkit


@pytest.mark.slow  # a real training process
def test_second_train_on_the_same_out_dir_is_refused(tmp_path, monkeypatch):
    data = trainkit.write_data(tmp_path / "data", n=64)
    rf = trainkit.write_runfile(
        tmp_path, data, model="tinymodels:with_ids", max_steps=10_000, steps_per_loop=1
    )
    out = tmp_path / "run"
    first = trainkit.start_train(rf, tmp_path / "ids_first.txt")
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "ids_first.txt").exists():  # training has started
            assert first.poll() is None, first.communicate()[1]
            assert time.monotonic() < deadline, "the first training never started"
            time.sleep(0.1)
        assert (out / LOCK_NAME).exists()
        monkeypatch.setenv("IDS_LOG", str(tmp_path / "ids_second.txt"))  # if it trained
        second = trainkit.tfperf_here("train", rf, "--no-progress", check=False)
        err = second.stderr
        assert second.returncode == 2, err
        assert f"train.out_dir {out} is in use by PID {first.pid}" in err
        assert "(tfperf train) since 20" in err and "Traceback" not in err
        assert not (tmp_path / "ids_second.txt").exists()  # it never trained
        # Watching the run's checkpoints by hand beside the training is normal.
        watch = trainkit.tfperf_here(
            "evaluate", str(rf), "--watch", "--timeout", "2", "--set", "data.eval_split=train"
        )
        assert "in use" not in watch.stderr
    finally:
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=120)
    assert not (out / LOCK_NAME).exists()  # released when the first one ended
    assert (out / "checkpoints" / "checkpoint").exists()  # it saved as it stopped
    # As an interrupted run (SIGTERM's case in test_resume.py): says what it saves, exits 130;
    # no checkpoint yet (every 500 steps, ~50 s of 0.1 s steps): the shuffle buffer's estimate.
    assert first.returncode == 130, err
    assert sorted((out / "checkpoints").glob("ckpt-*.index")), err
    assert re.search(r"SIGINT: saving a checkpoint at step \d+ with the input iterator \(", err)
    assert re.search(r"~[\d.]+ (KiB|MiB) for 16 records of ~\d+ B\)", err), err
    assert not (out / "checkpoints" / "FINAL").exists()
