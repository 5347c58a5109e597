"""`tfperf train --evaluator`: the evaluator's settings are checked before training starts
(no eval split, an unknown eval.metric: exit 2, nothing trained); an evaluator that dies is
reported at once and makes the trainer exit non-zero at the end; the summary shows the
evaluator's last result, which it wrote (eval summaries, its log) from its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tfperf.train.evaluator_process import MODULE

from helpers import trainkit


@pytest.fixture
def runfile(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)  # a train split only
    return str(trainkit.write_runfile(tmp_path, data, max_steps=8, checkpoint={"every_steps": 4}))


def _no_checkpoints(runfile) -> bool:
    out = os.path.join(os.path.dirname(runfile), "run", "checkpoints")
    return not os.path.isdir(out) or not any(n.startswith("ckpt-") for n in os.listdir(out))


def test_missing_eval_split_stops_before_training(runfile, cli):
    res = cli("train", runfile, "--evaluator", "--no-progress")
    assert res.exit_code == 2, res.output
    assert "--evaluator: the evaluator reads data.eval_split 'eval'" in res.stderr
    assert "no split 'eval'; found ['train']" in res.stderr and "--split eval" in res.stderr
    assert "Traceback" not in res.output and _no_checkpoints(runfile)


def test_unknown_eval_metric_stops_before_training(runfile, cli):
    sets = ["--set", "data.eval_split=train", "--set", "eval.metric=accuracy"]
    res = cli("train", runfile, "--evaluator", "--no-progress", *sets)
    assert res.exit_code == 2, res.output
    assert "eval.metric: expected one of ['loss'], found 'accuracy'" in res.stderr
    assert _no_checkpoints(runfile)


def _train(runfile, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "COLUMNS": "250", **(env or {})}
    cmd = [sys.executable, "-m", "tfperf.cli.main", "train", runfile, "--evaluator", *args]
    return subprocess.Popen(
        cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.slow  # a trainer (this process) and its evaluator process
def test_summary_shows_the_evaluators_last_result(runfile, cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    res = cli("train", runfile, "--evaluator", "--no-progress", "--set", "data.eval_split=train")
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if "evaluator" in ln and "step 8:" in ln)
    assert "loss=" in line
    run = Path(runfile).parent / "run"
    assert json.loads((run / "checkpoints" / "FINAL").read_text())["step"] == 8
    # The evaluator ran in its own process and wrote eval summaries for the last checkpoint.
    assert list((run / "logs" / "eval").glob("events.out.tfevents.*"))
    assert "evaluated" in (run / "logs" / "evaluator.log").read_text()


@pytest.mark.slow  # a trainer and its evaluator process
def test_evaluator_that_dies_fails_the_run_at_the_end(runfile, tmp_path):
    env = {"IDS_LOG": str(tmp_path / "ids.txt"), "IDS_PAUSE": "0.1"}
    sets = ["--set", "data.eval_split=train", "--set", "model.name=tinymodels:with_ids"]
    # 60 steps of 0.1 s: seconds of training left after the evaluator is found and killed.
    proc = _train(runfile, "--json", "--max-steps", "60", *sets, env=env)
    trainer = psutil.Process(proc.pid)
    deadline = time.monotonic() + 120
    child = None
    while child is None:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no evaluator process"
        child = next((k for k in trainer.children() if MODULE in _cmdline(k)), None)
        time.sleep(0.1)
    child.kill()  # as the OOM killer would
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    result = json.loads(out)
    assert result["steps"] == 60  # training itself went on to its end
    assert result["evaluator"]["failed"] and result["evaluator"]["exit_code"] == -9
    assert "evaluator: exited with status -9 at training step" in err
    assert "--evaluator: the evaluator failed (exit status -9)" in err
    assert "Traceback" not in err


def _cmdline(proc: psutil.Process) -> str:
    """A child's command line; '' for one that is gone or a zombie (a short-lived helper
    process, reaped a moment later)."""
    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return ""
