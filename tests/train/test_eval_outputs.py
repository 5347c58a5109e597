"""What the watching evaluator writes (train/eval_outputs.py), on real checkpoints in
tmp_path: a line per checkpoint in eval_results.jsonl (a torn last line skipped when read
back), best/ replaced only by a better value in eval.mode's direction and always one whole
checkpoint that reads, copied from the held copy when given; a best/ chosen by another
metric says nothing; eval.metric must be one that is computed."""

from __future__ import annotations

import json
import time

import pytest
import tensorflow as tf

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.eval_outputs import EvalOutputs, EvalRecord, check_eval_metric, last_record


def _checkpoint(prefix, value: float) -> str:
    """A real checkpoint of one variable holding `value`."""
    return tf.train.Checkpoint(v=tf.Variable(value)).write(str(prefix))


def _read(prefix) -> float:
    v = tf.Variable(0.0)
    tf.train.Checkpoint(v=v).read(str(prefix)).assert_consumed()
    return float(v.numpy())


def _outputs(eval_run, *overrides: str) -> EvalOutputs:
    cfg = load_config(eval_run.runfile, list(overrides))  # eval.metric mae, mode min
    return EvalOutputs(cfg, eval_run.out, eval_run.out / "logs" / "eval")


def test_records_and_best_follow_the_mode(eval_run, tmp_path):
    outputs = _outputs(eval_run)
    ckpts = tmp_path / "checkpoints"
    for step, mae in ((10, 0.5), (20, 0.2), (30, 0.3)):
        path = _checkpoint(ckpts / f"ckpt-{step}", mae)
        outputs.write(EvalRecord(step, path, {"loss": 1.0, "mae": mae}, examples=24))
    results = eval_run.results()
    assert [(r["step"], r["best"]) for r in results] == [(10, True), (20, True), (30, False)]
    assert outputs.evaluated_steps() == [10, 20, 30]
    best = eval_run.out / "best"
    assert json.loads((best / "best.json").read_text())["step"] == 20
    assert sorted(p.name for p in best.iterdir()) == [
        "best.json",
        "checkpoint",
        "ckpt-20.data-00000-of-00001",
        "ckpt-20.index",
    ]
    assert _read(tf.train.latest_checkpoint(str(best))) == pytest.approx(0.2)  # it reads
    assert [p.name for p in eval_run.out.iterdir() if p.name.startswith(".")] == []  # no temps
    # A restarted evaluator knows its best; under mode max the same values choose otherwise.
    assert _outputs(eval_run).best["value"] == pytest.approx(0.2)
    assert _outputs(eval_run, "eval.mode=max").best is None


def test_best_is_copied_from_the_held_copy_when_given(eval_run, tmp_path):
    original = tmp_path / "checkpoints" / "ckpt-5"
    held = _checkpoint(tmp_path / ".eval.tmp-1" / "ckpt-5", 0.7)  # the original is deleted
    _outputs(eval_run).write(EvalRecord(5, str(original), {"mae": 0.7}), source=held)
    best = json.loads((eval_run.out / "best" / "best.json").read_text())
    assert (best["checkpoint"], best["source"]) == ("ckpt-5", str(original))
    assert _read(eval_run.out / "best" / "ckpt-5") == pytest.approx(0.7)


def test_an_unknown_metric_writes_nothing(eval_run, tmp_path):
    path = _checkpoint(tmp_path / "ckpt-1", 0.0)
    with pytest.raises(UserError, match=r"eval.metric: expected one of \['loss'\], found 'mae'"):
        _outputs(eval_run).write(EvalRecord(1, path, {"loss": 0.1}))
    assert not (eval_run.out / "eval_results.jsonl").exists()
    check_eval_metric(load_config(eval_run.runfile), ["loss", "mae"])  # computed: fine


def test_last_record_skips_a_torn_line_and_older_runs(eval_run):
    out = eval_run.out
    assert last_record(out) is None  # nothing evaluated yet
    out.mkdir()
    now = time.time()
    old = EvalRecord(4, "ckpt-4", {"loss": 0.4}, time=now - 60).to_json()
    new = EvalRecord(8, "ckpt-8", {"loss": 0.2}, time=now).to_json()
    (out / "eval_results.jsonl").write_text(f'{old}\n{new}\n{{"step": 12, "metr')
    assert last_record(out)["step"] == 8
    assert last_record(out, since=now - 1)["step"] == 8
    (out / "eval_results.jsonl").write_text(old + "\n")
    assert last_record(out, since=now - 1) is None  # only an earlier run's
