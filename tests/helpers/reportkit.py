"""One small real run for the report's tests, made through the real command line in this
process: the chess workload's data (4,000 positions), 40 training steps, every checkpoint
evaluated, and `tfperf doctor --fix` on a tiny budget, its per-example parse left slow so
that the doctor has findings and trials to show."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RUNFILE = REPO / "examples" / "chess.yaml"
STEPS, EVERY = 40, 20  # checkpoints at steps 20 and 40
DOCTOR = "{steps: 6, warmup: 2, repeats: 2, min_seconds: 0.05, what_ifs: []}"


def settings(root: Path) -> list[str]:
    """--set items of the run: tiny data under `root`, the run folder root/run."""
    items = {
        "data.dir": root / "data",
        "data.examples": 4000,
        "data.eval_examples": 256,
        "train.out_dir": root / "run",
        "train.max_steps": STEPS,
        "train.max_time": "null",
        "train.log_every": 5,
        "train.checkpoint.every_steps": EVERY,
        "train.monitor_system": "false",
        "train.histogram_every": 1000,
        "pipeline.batch_size": 64,
        "pipeline.shuffle_buffer": 500,
        "pipeline.parse": "per_example",
        "pipeline.preprocess_parallelism": 1,
        "doctor": DOCTOR,
    }
    out: list[str] = []
    for key, value in items.items():
        out += ["--set", f"{key}={value}"]
    return out


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


def tfperf(*args: Any) -> Result:
    """`tfperf ARGS...` through its command-line app in this process."""
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    res = CliRunner().invoke(app, [str(a) for a in args])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return Result(res.exit_code, res.stdout, res.stderr)


def checked(*args: Any) -> Result:
    res = tfperf(*args)
    assert res.exit_code == 0, f"tfperf {args[0]} -> {res.exit_code}\n{res.stderr[-3000:]}"
    return res


@dataclass
class Run:
    root: Path
    run_dir: Path
    doctor_json: dict[str, Any]  # what `tfperf doctor --json` printed
    doctor_html: Path  # what `tfperf doctor --html` wrote


def make_run(root: Path, budget: float = 14) -> Run:
    """Trains, evaluates every checkpoint and runs the doctor with --fix, --json and --html."""
    s = settings(root)
    checked("train", RUNFILE, *s, "--no-progress")
    checked("evaluate", RUNFILE, *s, "--watch", "--all", "--max-batches", 2, "--poll", 0.1)
    html = root / "doctor.html"
    out = root / "chess.optimized.yaml"
    res = checked(
        "doctor", RUNFILE, *s, "--fix", "--budget", budget, "--json", "--out", out, "--html", html
    )
    return Run(root, root / "run", json.loads(res.stdout), html)
