"""The watching evaluator's loop (train/watch.py) in this process, on real checkpoints of a
tiny model: which checkpoints it takes (every one, or the newest when behind), what it
writes for each (summaries, eval_results.jsonl, best/), half-written and unreadable ones
retried then given up without a crash, the FINAL marker ending it (also one naming a
checkpoint that is not on disk), an unknown eval.metric refused before anything is written.
"""

from __future__ import annotations

import json

import pytest

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.checkpoints.folder import CheckpointInfo
from tfperf.train.eval_outputs import EvalRecord
from tfperf.train.evaluator import evaluate_checkpoint
from tfperf.train.watch import plan_catch_up, record_line, watch


@pytest.mark.parametrize(
    "steps, last, all_, todo, skipped",
    [
        ([10, 20, 30], -1, False, [30], 2),
        ([10, 20, 30], -1, True, [10, 20, 30], 0),
        ([10, 20, 30], 20, False, [30], 0),
        ([10, 20, 30], 30, False, [], 0),
        ([10, 20, 30, 40], 10, False, [40], 2),
        ([], -1, False, [], 0),
    ],
)
def test_plan_catch_up(steps, last, all_, todo, skipped):
    ready = [CheckpointInfo(s, f"ckpt-{s}") for s in steps]
    got, n = plan_catch_up(ready, last, all_)
    assert [c.step for c in got] == todo and n == skipped


def test_record_line_gives_step_metrics_best_and_skipped():
    rec = EvalRecord(step=30, checkpoint="ckpt-30", metrics={"loss": 0.1234567, "mae": 2.0})
    assert record_line(rec) == "step 30: loss=0.12346, mae=2"
    rec.best, rec.skipped = True, 2
    assert record_line(rec) == "step 30: loss=0.12346, mae=2 [green](best)[/] (skipped 2)"


def test_watch_all_sees_every_checkpoint_writes_summaries_and_best(eval_run):
    import tensorflow as tf
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    scales = {10: 0.2, 20: 0.9, 30: 0.6}  # step 20 is the best by mae
    for step, scale in scales.items():
        last = saver.save(step, scale)
    saver.final(30, last)
    records = watch(cfg, all_checkpoints=True, poll=0.1, timeout=60)
    assert [r.step for r in records] == [10, 20, 30]
    assert [r.skipped for r in records] == [0, 0, 0]
    for r in records:
        assert r.metrics["mae"] == pytest.approx(eval_run.expected(scales[r.step])["mae"], rel=1e-5)
        assert r.examples == eval_run.n_eval
    assert [r.best for r in records] == [True, True, False]

    out = eval_run.out
    assert [r["step"] for r in eval_run.results()] == [10, 20, 30]
    best = json.loads((out / "best" / "best.json").read_text())
    assert (best["metric"], best["step"]) == ("mae", 20)
    assert best["value"] == pytest.approx(eval_run.expected(0.9)["mae"], rel=1e-5)
    assert (out / "best" / "ckpt-20.index").exists()
    # best/ is a checkpoint of its own: it evaluates to the recorded value.
    assert evaluate_checkpoint(cfg, str(out / "best"))["mae"] == pytest.approx(best["value"])

    acc = EventAccumulator(str(out / "logs" / "eval"))
    acc.Reload()
    assert {"loss", "mae"} <= set(acc.Tags()["tensors"])  # training's tags, in logs/eval
    events = acc.Tensors("mae")
    assert [e.step for e in events] == [10, 20, 30]
    for e in events:
        value = float(tf.make_ndarray(e.tensor_proto))
        assert value == pytest.approx(eval_run.expected(scales[e.step])["mae"], rel=1e-5)

    # A restarted evaluator does not redo what eval_results.jsonl already holds.
    assert watch(cfg, all_checkpoints=True, poll=0.1, timeout=30) == []


def test_backlog_evaluates_newest_and_counts_skipped(eval_run, capsys):
    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    for step in (10, 20, 30, 40):
        last = saver.save(step, 1.0 - step / 100)
    saver.final(40, last)
    records = watch(cfg, poll=0.1, timeout=60)
    assert [(r.step, r.skipped) for r in records] == [(40, 3)]
    assert "skipped 3" in capsys.readouterr().err
    assert json.loads((eval_run.out / "best" / "best.json").read_text())["step"] == 40


def test_half_written_and_unreadable_checkpoints_never_crash_it(eval_run, capsys):
    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    saver.save(10, 0.5)
    d = saver.dir
    # ckpt-20: an index but no data yet; ckpt-30: listed but absent; ckpt-25: complete on
    # disk but garbage (a read error, retried then given up).
    (d / "ckpt-20.index").write_bytes(b"\0" * 16)
    (d / "ckpt-25.index").write_bytes(b"not a checkpoint index")
    (d / "ckpt-25.data-00000-of-00001").write_bytes(b"junk")
    state = (d / "checkpoint").read_text()
    for step in (20, 25, 30):
        state += f'all_model_checkpoint_paths: "ckpt-{step}"\n'
    (d / "checkpoint").write_text(state.replace('"ckpt-10"\nall', '"ckpt-30"\nall', 1))
    records = watch(cfg, all_checkpoints=True, poll=0.05, timeout=4)
    assert [r.step for r in records] == [10]
    err = capsys.readouterr().err
    assert "will retry" in err and "giving up on" in err and "ckpt-25" in err
    assert "ckpt-20" not in err and "ckpt-30" not in err  # never even tried
    # Once ckpt-20 is whole and FINAL names it, the evaluator takes it and stops.
    (d / "ckpt-20.index").unlink()
    path = saver.save(20, 1.0)
    saver.final(20, path)
    records = watch(cfg, all_checkpoints=True, poll=0.05, timeout=60)
    assert [r.step for r in records] == [20]
    assert records[0].metrics["mae"] == pytest.approx(0.0, abs=1e-5)


def test_unknown_eval_metric_names_the_field(eval_run):
    cfg = load_config(eval_run.runfile, ["eval.metric=accuracy"])
    saver = eval_run.saver(cfg)
    saver.final(10, saver.save(10, 1.0))
    with pytest.raises(UserError, match=r"eval.metric: expected one of \['loss', 'mae'\]"):
        watch(cfg, poll=0.1, timeout=30)
    assert not (eval_run.out / "eval_results.jsonl").exists()
    assert not (eval_run.out / "best").exists()


def test_final_naming_a_missing_checkpoint_ends_the_watch(eval_run, capsys):
    cfg = load_config(eval_run.runfile)
    saver = eval_run.saver(cfg)
    saver.save(10, 1.0)
    saver.final(20, str(saver.dir / "ckpt-20"))  # never written (e.g. deleted by hand)
    records = watch(cfg, poll=0.05, timeout=60)
    assert [r.step for r in records] == [10]
    assert "not on disk" in capsys.readouterr().err
