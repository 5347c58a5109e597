"""Evaluating one checkpoint (train/evaluator.py) on tiny real data: the mean loss and
metrics equal numpy's, a folder means its newest finished checkpoint, a checkpoint of
another model is a clear error, an eval split that repeats forever needs eval.steps; and
`tfperf evaluate` once (`--checkpoint`, `--all`), its user errors exit 2 without a
traceback (the command line in this process)."""

from __future__ import annotations

import json

import pytest

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.evaluator import (
    CheckpointMismatchError,
    Evaluator,
    check_eval_settings,
    evaluate_checkpoint,
    run_paths,
)

from helpers import trainkit


def test_evaluate_checkpoint_matches_numpy(eval_run):
    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    p_half = saver.save(10, 0.5)
    p_one = saver.save(20, 1.0)
    got = evaluate_checkpoint(cfg, p_half)
    want = eval_run.expected(0.5)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-5)
    assert evaluate_checkpoint(cfg, p_one)["mae"] == pytest.approx(0.0, abs=1e-5)
    # A folder means its newest finished checkpoint.
    assert evaluate_checkpoint(cfg, str(saver.dir))["mae"] == pytest.approx(0.0, abs=1e-5)


def test_max_batches_and_the_restored_step(eval_run):
    cfg = load_config(eval_run.runfile)
    path = eval_run.saver(cfg).save(7, 1.0)
    step, metrics, examples = Evaluator(cfg, max_batches=1).evaluate(path)
    assert (step, examples) == (7, eval_run.batch)  # one batch of the 24 examples
    assert metrics["mae"] == pytest.approx(0.0, abs=1e-5)
    out = eval_run.out
    assert run_paths(cfg) == (out, out / "checkpoints", out / "logs" / "eval")


def test_checkpoint_of_another_model_is_a_clear_error(eval_run):
    cfg = load_config(eval_run.runfile)
    path = eval_run.saver(cfg, builder="build_other").save(5, 1.0)
    with pytest.raises(CheckpointMismatchError, match="does not fit the model"):
        evaluate_checkpoint(cfg, path)


def test_eval_settings_are_checked_before_training(eval_run):
    cfg = load_config(eval_run.runfile)
    check_eval_settings(cfg, ["mae"])  # an eval split that ends, a metric it computes
    with pytest.raises(UserError, match=r"--evaluator: the evaluator reads data.eval_split 'x'"):
        check_eval_settings(load_config(eval_run.runfile, ["data.eval_split=x"]), ["mae"])
    with pytest.raises(UserError, match=r"eval.metric: expected one of \['loss'\]"):
        check_eval_settings(cfg, [])


def test_cli_once_json_and_watch_all(eval_run):
    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    saver.save(10, 0.5)
    saver.final(20, saver.save(20, 1.0))
    base = ("evaluate", eval_run.runfile)  # the command line in this process
    once = trainkit.tfperf_here(*base, "--checkpoint", saver.dir / "ckpt-10", "--json")
    got = json.loads(once.stdout)
    assert got["step"] == 10
    assert got["metrics"]["mae"] == pytest.approx(eval_run.expected(0.5)["mae"], rel=1e-5)
    assert not (eval_run.out / "eval_results.jsonl").exists()  # one-shot writes nothing
    watched = trainkit.tfperf_here(*base, "--watch", "--all", "--poll", "0.1", "--json")
    assert [r["step"] for r in json.loads(watched.stdout)] == [10, 20]


def test_cli_user_errors_exit_2_without_traceback(eval_run, cli):
    res = cli("evaluate", eval_run.runfile)
    assert res.exit_code == 2
    assert "no finished checkpoint yet" in res.output and "Traceback" not in res.output
    res = cli("evaluate", eval_run.runfile, "--watch", "--checkpoint", "x")
    assert res.exit_code == 2 and "--checkpoint" in res.output


def test_cli_all_without_watch_evaluates_every_checkpoint_on_disk(eval_run, cli):
    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    for step, scale in ((10, 0.5), (20, 1.0)):
        saver.save(step, scale)
    res = cli("evaluate", eval_run.runfile, "--all", "--json", "--max-steps", "1")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["step"] for r in rows] == [10, 20]
    assert [r["examples"] for r in rows] == [eval_run.batch] * 2  # --max-steps 1: one batch
