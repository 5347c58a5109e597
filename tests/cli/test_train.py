"""`tfperf train`'s end-of-run table for a run stopped before any timed call (a Ctrl-C
during the compiling first call): rates are 'not measured', never '0.0 ex/s, 0% waiting'
(which reads as 'not input-bound')."""

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
