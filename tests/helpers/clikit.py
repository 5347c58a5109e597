"""Helpers of the command-line tests: `tfperf` run as a real subprocess with a chosen
environment, and a tiny converted dataset written with the library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TFPERF = str(Path(sys.executable).parent / "tfperf")


def run_tfperf(
    *args: object, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`tfperf ARGS...` in a subprocess whose stdout and stderr are pipes, not a terminal;
    `env` is merged over os.environ (TensorFlow's C++ log level 2 unless `env` says)."""
    full = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.run(
        [TFPERF, *(str(a) for a in args)],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def tiny_dataset(root: Path, rows: int = 64) -> Path:
    """A converted CSV (features x1, x2 and label y) in `root`, as `tfperf convert` writes it."""
    from tfperf.data.convert.run import convert

    root.mkdir(parents=True, exist_ok=True)
    csv = root.parent / f"{root.name}.csv"
    lines = ["x1,x2,y"] + [f"{i * 0.5},{i % 7},{i % 2}" for i in range(rows)]
    csv.write_text("\n".join(lines) + "\n")
    convert(str(csv), str(root), workers=1, progress=False)
    return root
