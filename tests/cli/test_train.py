"""`tfperf train`'s end-of-run table for a run stopped before any timed call (a Ctrl-C
during the compiling first call): rates are 'not measured', never '0.0 ex/s, 0% waiting'
(which reads as 'not input-bound'); a cluster run without a shared service job refused
before TensorFlow is imported."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from tfperf.cli.train import print_summary
from tfperf.train.loop import TrainResult


def result(examples_per_sec: float) -> TrainResult:
    here = Path("/tmp/run")
    return TrainResult(
        steps=1,
        examples_per_sec=examples_per_sec,
        input_bound_fraction=0.0,
        wait_ms_mean=0.0,
        final_loss=0.5,
        out_dir=here,
        checkpoint_dir=here / "checkpoints",
        log_dir=here / "logs",
        precision="float32",
        strategy="one_device",
        stopped_because="signal",
        jit_compile_reason="auto: off on a CPU-only host (as Keras' compile)",
    )


def table(r: TrainResult) -> str:
    out = io.StringIO()
    print_summary(r, Console(file=out, width=100))
    return out.getvalue()


def test_a_run_with_no_timed_call_says_not_measured():
    text = table(result(0.0))
    assert "not measured (only the compiling first call ran)" in text
    assert "0.0%" not in text and "input-bound fraction" not in text
    assert "XLA" in text and "off (auto: off on a CPU-only host" in text
    assert "input-bound fraction" in table(result(1234.0))


REFUSED = """
import runpy, sys
sys.argv = ["tfperf", "train", sys.argv[1], "--set", "pipeline.service.job_name=null"]
try:
    runpy.run_module("tfperf.cli.main", run_name="__main__")
except SystemExit as exc:
    print("exit", exc.code, "tensorflow imported:", "tensorflow" in sys.modules)
"""


def test_a_cluster_run_without_a_shared_job_is_refused_before_tensorflow(tmp_path):
    """Two multi_worker tasks reading a tf.data service without a job_name would each read
    everything: `tfperf train` says so before TensorFlow's import (and the bind re-exec)."""
    import json
    import os
    import subprocess
    import sys

    import yaml

    from helpers import trainkit

    rf = trainkit.write_runfile(tmp_path, trainkit.write_data(tmp_path / "data", n=64, shards=2))
    doc = yaml.safe_load(rf.read_text())
    doc["train"]["strategy"] = "multi_worker"
    doc["pipeline"]["service"] = {"address": "127.0.0.1:1", "mode": "distributed_epoch"}
    rf.write_text(yaml.safe_dump(doc))
    workers = [f"127.0.0.1:{trainkit.free_port()}" for _ in range(2)]
    tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}}
    env = {**os.environ, "TF_CONFIG": json.dumps(tf_config)}
    out = subprocess.run(
        [sys.executable, "-c", REFUSED, str(rf)], env=env, capture_output=True, text=True
    )
    assert "exit 2 tensorflow imported: False" in out.stdout, out.stdout + out.stderr[-3000:]
    said = " ".join(out.stderr.split())
    assert "2 multi_worker tasks" in said and "job_name" in said, said


def test_the_rate_and_the_wait_carry_their_windows_spread_in_text_and_json():
    from dataclasses import replace

    r = replace(
        result(1234.0),
        input_bound_fraction=0.12,
        examples_per_sec_range=(1000.0, 1500.0),
        input_bound_fraction_range=(0.05, 0.2),
    )
    text = " ".join(table(r).split())
    assert "1,234 (1,000-1,500)" in text and "12.0% (5.0-20.0%) of the time" in text
    assert "slowest and fastest stretch of 1 s" in text  # what the brackets are
    d = r.to_dict()
    assert d["examples_per_sec_range"] == (1000.0, 1500.0)
    assert d["examples_per_sec_text"] == "1,234 (1,000-1,500)"
    assert d["input_bound_fraction_text"] == "12.0% (5.0-20.0%)"
    # One window: the figure alone, no note.
    assert result(1234.0).to_dict()["examples_per_sec_text"] == "1,234"
    assert result(1234.0).spread_note is None and "stretch" not in table(result(1234.0))
