"""`tfperf demo` end to end with a step limit: data made and converted, training with the
evaluator in its own process, and a summary that names speed, input-bound fraction, loss,
the final evaluation and where logs and checkpoints are."""

from __future__ import annotations

import json
from pathlib import Path


def test_demo_runs_with_a_step_limit(tmp_path, cli, monkeypatch):
    out = tmp_path / "demo"
    # A relative --out, as `make demo` gives: every path must land inside it, once. The
    # command line runs in this process (no TensorFlow start-up); the evaluator is a child.
    monkeypatch.chdir(tmp_path)
    res = cli("demo", "--out", "demo", "--max-steps", "40", "--examples", "6000", "--json")
    assert res.exit_code == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)
    assert summary["steps"] == 40
    assert summary["examples_per_sec"] > 0
    # Its spread over windows of 1 s of timed calls, when there were two (a loaded host may
    # fit 40 steps in one), holds the run's rate; the text says both.
    if summary["examples_per_sec_range"] is not None:
        low, high = summary["examples_per_sec_range"]
        assert low <= summary["examples_per_sec"] <= high
        assert summary["examples_per_sec_text"].endswith(")") and summary["spread_note"]
    assert 0.0 <= summary["input_bound_fraction"] <= 1.0
    assert summary["final_loss"] == summary["final_loss"]  # finite, not NaN
    # The evaluator process evaluated the run's final checkpoint.
    assert summary["eval"] is not None and summary["eval"]["step"] == 40
    assert Path(summary["checkpoints"]) == out / "run" / "checkpoints"
    assert (Path(summary["checkpoints"]) / "FINAL").exists()
    assert Path(summary["logs"], "train").is_dir()
    assert (out / "data" / "manifest.json").exists()
    assert summary["tensorboard"].startswith("tensorboard --logdir")
