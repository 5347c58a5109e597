"""`tfperf convert` of wide CSVs (many columns, 5 rows): the CPU of the whole command in a
fresh process (its own start-up included) for 1,000, 3,000 and 10,000 columns of floats.
Linear in the cells since the schema looks features up by name in a dict (issue 32: 10,000
columns took 148 s of CPU, 3,000 10 s, 1,000 2.3 s, from lookups that scanned every column).

    python benchmarks/bench_convert_wide.py [--quick] [--repeats N]
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import machine, parse_args, say, table

ROWS = 5


def write_csv(path: Path, columns: int) -> None:
    rng = random.Random(0)
    with path.open("w") as f:
        f.write(",".join(f"c{j}" for j in range(columns)) + "\n")
        for _ in range(ROWS):
            f.write(",".join(f"{rng.random():.6f}" for _ in range(columns)) + "\n")


def convert_cpu(csv: Path, out: Path) -> float:
    """CPU seconds (user + sys) of `tfperf convert CSV --out OUT` in a fresh process."""
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    cmd = [sys.executable, "-m", "tfperf.cli.main", "convert", str(csv), "--out", str(out)]
    subprocess.run([*cmd, "--quiet"], env=env, check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    args = parse_args(__doc__)
    repeats = args.repeats or (1 if args.quick else 3)
    widths = (1_000, 10_000) if args.quick else (1_000, 3_000, 10_000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for columns in widths:
            csv = Path(tmp) / f"wide{columns}.csv"
            write_csv(csv, columns)
            cpu = [convert_cpu(csv, Path(tmp) / "out") for _ in range(repeats)]
            say(f"{columns:,} columns: {statistics.median(cpu):.2f} s")
            med = statistics.median(cpu)
            rows.append(
                [
                    f"{columns:,}",
                    f"{med:.2f} s [{min(cpu):.2f}-{max(cpu):.2f}]",
                    f"{columns * ROWS:,}",
                ]
            )
    print("## Convert: wide CSVs, 5 rows (bench_convert_wide.py)\n")
    print(machine() + "\n")
    print(table(["columns", f"CPU of the command, median [min-max] of {repeats}", "cells"], rows))
    print(
        "\nThe CPU includes the process's start-up and its writer processes' (about 1 s: "
        "convert does not import TensorFlow); before issue 32's fix 10,000 columns took 148 s."
    )


if __name__ == "__main__":
    main()
