"""Shared test fixtures: quiet TensorFlow, and the `tfperf` command run in-process
(`cli`) or as a real subprocess (`tfperf_exe`). Tests use tiny data in tmp_path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


class CliResult:
    def __init__(self, exit_code: int, stdout: str, stderr: str):
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def cli():
    """Runs `tfperf ARGS...` in this process; returns exit_code, stdout and stderr."""
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    def run(*args: str) -> CliResult:
        res = CliRunner().invoke(app, [str(a) for a in args])
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return CliResult(res.exit_code, res.stdout, res.stderr)

    return run


@pytest.fixture
def tfperf_exe() -> str:
    """The installed `tfperf` script of this interpreter's environment."""
    exe = Path(sys.executable).parent / "tfperf"
    assert exe.exists(), f"{exe}: tfperf is not installed in this environment"
    return str(exe)
