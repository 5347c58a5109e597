"""Runs every benchmarks/bench_*.py and pastes each one's markdown section into
BENCHMARKS.md between its markers, leaving the rest of the file (hand-written notes) alone.

    python benchmarks/run_all.py [NAME ...] [--quick] [--dry-run]

The scheme, for new benchmarks: a script named bench_<name>.py prints one markdown section
on stdout (progress and logs go to stderr) and exits 0. Its section sits between
`<!-- begin bench_<name> -->` and `<!-- end bench_<name> -->`; a script without markers yet
gets them appended at the end. A script that fails keeps its previous section.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tfperf.util.files import write_text_atomic

HERE = Path(__file__).resolve().parent
OUT = HERE.parent / "BENCHMARKS.md"


def scripts(names: list[str]) -> list[Path]:
    found = sorted(HERE.glob("bench_*.py"))
    if not names:
        return found
    wanted = {n.removesuffix(".py").removeprefix("bench_") for n in names}
    chosen = [p for p in found if p.stem.removeprefix("bench_") in wanted]
    missing = wanted - {p.stem.removeprefix("bench_") for p in chosen}
    if missing:
        sys.exit(
            f"no benchmarks/bench_<name>.py for: {', '.join(sorted(missing))}; "
            f"found {[p.stem for p in found]}"
        )
    return chosen


def replace_section(text: str, name: str, body: str) -> str:
    """`text` with the section of `name` set to `body` (appended when it has no markers)."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="benchmarks to run (default: all), e.g. chess_pipeline")
    p.add_argument("--quick", action="store_true", help="pass --quick: a fast, rough run")
    p.add_argument("--dry-run", action="store_true", help="print the sections, keep the file")
    args = p.parse_args()
    env = os.environ | {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
    text = OUT.read_text() if OUT.exists() else "# Benchmarks\n"
    failed = []
    for script in scripts(args.names):
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        print(f"== {script.name}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        # stderr passes through (progress bars); stdout is the section.
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
        took = time.perf_counter() - start
        if proc.returncode != 0 or not proc.stdout.strip():
            print(
                f"!! {script.name} failed (exit {proc.returncode}); its section is unchanged",
                file=sys.stderr,
            )
            failed.append(script.name)
            continue
        print(f"   done in {took:.0f} s", file=sys.stderr)
        if args.dry_run:
            print(proc.stdout)
        text = replace_section(text, script.stem, proc.stdout)
        if not args.dry_run:
            # Written after every script: an interrupted run keeps the sections it finished.
            write_text_atomic(OUT, text)  # readers never see half a file
            print(f"   wrote its section to {OUT}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
