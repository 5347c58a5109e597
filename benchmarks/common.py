"""What the benchmark scripts share: their command-line options, a note on the machine,
and markdown helpers. Each benchmarks/bench_*.py prints one markdown section on stdout
(progress goes to stderr); run_all.py pastes the sections into BENCHMARKS.md."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
# Generated data for benchmarks lives under runs/ (git-ignored) unless --data says otherwise.
DATA_ROOT = REPO / "runs" / "bench"


def parse_args(doc: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options every benchmark script accepts."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--quick", action="store_true",
                   help="few batches and repeats: the script runs, numbers are rough")  # fmt: skip
    p.add_argument("--data", default=None,
                   help="data directory (manifest.json) to use, not generated data")  # fmt: skip
    p.add_argument("--repeats", type=int, default=None, help="override the repeats")
    p.add_argument("--batches", type=int, default=None, help="override batches per run")
    return p.parse_args(argv)


def machine() -> str:
    """One line on what produced the numbers (numbers only compare on the same line)."""
    import tensorflow as tf

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"TensorFlow {tf.__version__}, Python {sys.version.split()[0]}, "
            f"{os.cpu_count()} CPU cores ({cpu}), load average {load:.1f} at start")  # fmt: skip


def rate(x: float) -> str:
    """examples/s for tables: 123,456."""
    return f"{x:,.0f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; the first column left-aligned, the others right-aligned."""
    align = ["---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def spread(stat) -> str:  # noqa: ANN001 - a tfperf.bench.Stat
    """median [min-max] of a tfperf.bench.Stat."""
    return f"{rate(stat.median)} [{rate(stat.min)}-{rate(stat.max)}]"
