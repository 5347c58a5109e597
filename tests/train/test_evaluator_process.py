"""The evaluator as a child process of training (train/evaluator_process.py): its outcome in
words, its last error line read from its log, ending a child that is still running; the
spawned watcher follows checkpoints to FINAL and exits, or exits when its trainer dies;
`tfperf train --evaluator` checks the evaluator's settings before training starts (no eval
split, an unknown eval.metric: exit 2, nothing trained), shows the evaluator's last result
in its summary, and an evaluator that dies is reported at once and makes the trainer exit
non-zero at the end. Real processes: the process is the point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tfperf.config import load_config
from tfperf.train.evaluator_process import (
    MODULE,
    EvaluatorOutcome,
    _last_error,
    finish_evaluator,
    main,
    spawn_evaluator,
)

from helpers import trainkit


@pytest.fixture
def runfile(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64)  # a train split only
    return str(trainkit.write_runfile(tmp_path, data, max_steps=8, checkpoint={"every_steps": 4}))


# ---- the outcome, the log, ending the child ---------------------------------------------------


def test_outcome_describes_the_last_result_or_why_there_is_none():
    last = {"step": 8, "metrics": {"loss": 0.1234567}, "best": True}
    done = EvaluatorOutcome(0, False, None, last, "evaluator.log")
    assert not done.failed and done.describe() == "step 8: loss=0.12346 (best)"
    assert done.to_dict()["summary"] == done.describe() and done.to_dict()["failed"] is False
    stopped = EvaluatorOutcome(-15, True, None, None, "evaluator.log")
    assert not stopped.failed  # stopped by the trainer is not a failure
    assert stopped.describe() == "no checkpoint evaluated (stopped with training)"
    died = EvaluatorOutcome(-9, False, None, last, "run/logs/evaluator.log")
    assert died.failed and died.describe() == "failed (exit status -9): see run/logs/evaluator.log"
    erred = EvaluatorOutcome(2, False, "error: eval.metric: expected ...", None, "log")
    assert erred.describe() == "failed (exit status 2): error: eval.metric: expected ..."


def test_last_error_reads_the_log_from_the_offset(tmp_path):
    log = tmp_path / "evaluator.log"
    assert _last_error(log, 0) is None  # no log yet
    log.write_text("error: from an earlier run\n")
    offset = log.stat().st_size
    with log.open("a") as f:
        f.write("evaluator: watching\nerror: first\nstep 4: loss=1\nerror: second\n\n")
    assert _last_error(log, offset) == "error: second"
    offset = log.stat().st_size
    with log.open("a") as f:
        f.write("Traceback (most recent call last):\nValueError: boom\n")
    assert _last_error(log, offset) == "ValueError: boom"  # no error: line, the last one


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def test_finish_evaluator_awaits_a_normal_end_and_stops_the_rest():
    assert finish_evaluator(_child("raise SystemExit(3)"), normal=True) == (3, False)
    ended = _child("pass")
    ended.wait()
    assert finish_evaluator(ended, normal=False) == (0, False)  # it had ended by itself
    watching = _child("import time; time.sleep(120)")
    assert finish_evaluator(watching, normal=False) == (-15, True)  # SIGTERM


def test_main_reports_a_user_error_with_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # main hides the GPUs; restored after
    assert main([str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "missing.yaml" in err


# ---- the spawned watcher ----------------------------------------------------------------------


def _wait_for(predicate, seconds: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert proc.poll() is None, "the evaluator exited early"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.slow  # an evaluator process beside this one
def test_spawned_watcher_follows_training_and_exits_after_final(eval_run):
    cfg = load_config(eval_run.runfile, ["eval.mode=max"])  # max mae: the worst fit is best
    out = eval_run.out
    proc = spawn_evaluator(str(eval_run.runfile), ["eval.mode=max"])
    try:
        saver = eval_run.saver(cfg)
        # The child's Evaluator is built once it creates logs/eval.
        _wait_for(lambda: (out / "logs" / "eval").exists(), 90, proc)
        saver.save(10, 0.9)
        _wait_for(lambda: (out / "eval_results.jsonl").exists(), 60, proc)
        saver.save(20, 0.0)
        saver.final(30, saver.save(30, 0.5))
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    steps = [r["step"] for r in eval_run.results()]
    assert steps[0] == 10 and steps[-1] == 30  # 20 may be skipped when it fell behind
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["mode"] == "max" and best["step"] == (20 if 20 in steps else 30)
    log = (out / "logs" / "evaluator.log").read_text()
    assert "step 30" in log and "Traceback" not in log


@pytest.mark.slow  # a trainer process and its evaluator process
def test_watcher_exits_when_its_trainer_dies(eval_run):
    """A trainer killed without FINAL must not leave its evaluator behind."""
    code = (
        "import sys; from tfperf.train.evaluator_process import spawn_evaluator; "
        f"p = spawn_evaluator({str(eval_run.runfile)!r}, ['train.out_dir=out']); print(p.pid)"
    )
    parent = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    child = psutil.Process(int(parent.stdout.strip()))
    deadline = time.monotonic() + 90
    while child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the evaluator outlived its trainer"
        time.sleep(0.2)
    log = (eval_run.out / "logs" / "evaluator.log").read_text()
    assert "exited without FINAL" in log


# ---- `tfperf train --evaluator` ---------------------------------------------------------------


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


@pytest.mark.slow  # a trainer (this process) and its evaluator process
def test_the_evaluator_follows_training_to_final_and_the_summary_shows_its_result(
    runfile, cli, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "250")
    res = cli("train", runfile, "--evaluator", "--no-progress", "--set", "data.eval_split=train")
    assert res.exit_code == 0, res.output
    run = Path(runfile).parent / "run"
    assert json.loads((run / "checkpoints" / "FINAL").read_text())["step"] == 8
    results = [json.loads(x) for x in (run / "eval_results.jsonl").read_text().splitlines()]
    assert results[-1]["step"] == 8  # the FINAL checkpoint is always evaluated
    best = json.loads((run / "best" / "best.json").read_text())
    assert best["value"] == min(r["metrics"]["loss"] for r in results)
    line = next(ln for ln in res.output.splitlines() if "evaluator" in ln and "step 8:" in ln)
    assert f"loss={results[-1]['metrics']['loss']:.5g}" in line
    # The evaluator ran in its own process and wrote eval summaries for the last checkpoint.
    assert list((run / "logs" / "eval").glob("events.out.tfevents.*"))
    log = (run / "logs" / "evaluator.log").read_text()
    assert "evaluated" in log and "Traceback" not in log


@pytest.mark.slow  # a trainer (this process) and its evaluator process
def test_evaluator_that_dies_fails_the_run_at_the_end(runfile, tmp_path, cli, monkeypatch):
    # The trainer in this process (the exit status it gives is the command's, as in the test
    # above); its evaluator a real child process, killed from a thread while training runs.
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("IDS_LOG", str(tmp_path / "ids.txt"))
    monkeypatch.setenv("IDS_PAUSE", "0.1")
    sets = ["--set", "data.eval_split=train", "--set", "model.name=tinymodels:with_ids"]
    killed: list[int] = []  # the killed evaluator's PID, once found
    done = threading.Event()

    def kill_the_evaluator() -> None:
        me, deadline = psutil.Process(), time.monotonic() + 120
        while not done.is_set() and time.monotonic() < deadline:
            child = next((k for k in me.children() if MODULE in _cmdline(k)), None)
            if child is not None:
                child.kill()  # as the OOM killer would
                killed.append(child.pid)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_the_evaluator, daemon=True)
    killer.start()
    try:
        # 60 steps of 0.1 s: seconds of training left after the evaluator is found and killed.
        res = cli("train", runfile, "--evaluator", "--json", "--max-steps", "60", *sets)
    finally:
        done.set()
        killer.join(timeout=30)
    assert killed, f"no evaluator process\n{res.stderr}"
    err = res.stderr
    assert res.exit_code == 1, err
    result = json.loads(res.stdout)
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
