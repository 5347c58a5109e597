"""`tfperf doctor` from the command line: the table, and clear errors for user mistakes (a
compute-bound run's verdict is test_user_pipelines.py's compute_bound case; --json's keys
are read in probes/test_budget.py and the run-folder tests). The doctor runs in this
process (the `cli` fixture); a real process only where its exit code and help text are the
point. What --fix writes is in test_doctor_fix_files.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TFPERF = [sys.executable, "-m", "tfperf.cli.main"]
FAST = "{steps: 4, warmup: 2, repeats: 2, min_seconds: 0.05}"


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", COLUMNS="200")  # PYTHONPATH: conftest.py
    return subprocess.run(
        TFPERF + args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def write_run(tmp_path: Path, pipeline: str, model: str, batch: int = 32, extra: str = "") -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"data:\n  pipeline: helpers.slow_pipelines:{pipeline}\n"
        f"model:\n  name: helpers.slow_pipelines:{model}\n  loss: mse\n"
        f"pipeline:\n  batch_size: {batch}\n"
        f"doctor: {FAST}\n{extra}"
    )
    return path


def test_table_names_the_finding_and_the_slowest_stage(tmp_path, cli, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    path = write_run(tmp_path, "py_function", "tiny_model")
    res = cli("doctor", path)
    assert res.exit_code == 0, res.output
    out = res.stdout
    # The planted py_function is highly input-bound, unless the host's load made the
    # measurement contradict itself, which the report then says instead of a verdict.
    inconsistent = out.startswith("no verdict: the measurement is inconsistent")
    assert "highly input-bound" in out or inconsistent, out[:300]
    assert "py_function" in out and "slowest" in out
    assert "compute limit" in out and "stage prefixes" in out
    # Redirected, the findings were one line per row, 2,247 columns wide: now the tables
    # are laid out for 100 columns, long words folded rather than cut.
    tables = [line for line in out.splitlines() if line[:1] in "┏┃┡│├└"]
    assert tables and max(len(line) for line in tables) <= 100, out
    assert "…" not in out
    # the report opens with the verdict, its prose wrapped at 100 columns too
    assert out.startswith("verdict: highly input-bound") or inconsistent, out[:300]
    head = out.split("measured side by side")[0].splitlines()
    assert max(len(line) for line in head) <= 100, head


def test_user_errors_are_one_line(tmp_path, cli):
    (tmp_path / "notds.py").write_text("def make(**kw):\n    return [1, 2, 3]\n")
    path = tmp_path / "bad.yaml"
    path.write_text(
        "data:\n  pipeline: notds:make\nmodel:\n  name: helpers.slow_pipelines:tiny_model\n"
    )
    res = cli("doctor", path)
    assert res.exit_code == 2
    assert "data.pipeline" in res.stderr and "Traceback" not in res.stderr
    # a real process: its exit code (no TensorFlow is loaded before the run file is read)
    res = run(["doctor", str(tmp_path / "missing.yaml")], tmp_path)
    assert res.returncode == 2 and "no such run file" in res.stderr


def test_help_explains_every_option(tmp_path):
    res = run(["doctor", "--help"], tmp_path)
    assert res.returncode == 0
    for opt in ("--set", "--json", "--fix", "--max-steps", "--repeats", "--out"):
        assert opt in res.stdout


def test_allow_names_a_wrong_value(cli, tmp_path):
    res = cli("doctor", "--allow", "precision,speed", "--set", "workload=regression")
    assert res.exit_code == 2, res.output
    assert "--allow: expected a comma-separated list of precision, batch, found 'speed'" in (
        res.stderr
    )
