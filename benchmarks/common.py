"""What the benchmark scripts share: their command-line options, a note on the machine,
markdown helpers, and the few timings `tfperf.measure` cannot make itself (a whole
`tfperf train` run, Keras' model.fit) turned into its `Run`s, so that spreads and paired
ratios come from `Measurement` and `compare()` everywhere. Each benchmarks/bench_*.py
prints one markdown section on stdout (progress goes to stderr); run_all.py pastes the
sections into BENCHMARKS.md."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tfperf.measure import Comparison, Run, Stat

# TensorFlow's C++ logs quiet; the scripts import TensorFlow only later, on first use.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
# Generated data for benchmarks lives under runs/ (git-ignored) unless --data says otherwise.
DATA_ROOT = REPO / "runs" / "bench"


def parse_args(doc: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options every benchmark script accepts."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument(
        "--quick",
        action="store_true",
        help="few batches and repeats: the script runs, numbers are rough",
    )
    p.add_argument(
        "--data", default=None, help="data directory (manifest.json) to use, not generated data"
    )
    p.add_argument("--repeats", type=int, default=None, help="override the repeats")
    p.add_argument("--batches", type=int, default=None, help="override batches per run")
    return p.parse_args(argv)


def train_section(prefix: str, steps: int, precision: str) -> dict[str, Any]:
    """A benchmark run file's `train` section: `steps` steps into a fresh temporary
    directory, no system monitor, no checkpoint on the way."""
    return {
        "out_dir": tempfile.mkdtemp(prefix=prefix),
        "max_steps": steps,
        "precision": precision,
        "monitor_system": False,
        "checkpoint": {"every_steps": 1_000_000},
    }


def regression_cfg(prefix: str, steps: int, precision: str) -> Any:
    """The regression workload's run (batch 128 x 1024 features, Adam(1e-2)), its data
    generated once under DATA_ROOT."""
    from tfperf.config import config_from_dict

    data = {"dir": str(DATA_ROOT / "regression"), "examples": 20000, "eval_examples": 100}
    return config_from_dict(
        {
            "workload": "regression",
            "data": data,
            "pipeline": {"batch_size": 128},
            "model": {"learning_rate": 0.01},
            "train": train_section(prefix, steps, precision),
        }
    )


def say(msg: str) -> None:
    """Progress on stderr (stdout is the markdown section)."""
    print(msg, file=sys.stderr, flush=True)


def announce(repeats: int) -> Callable[[str, int], None]:
    """A `side_by_side` on_run callback: one line on stderr per finished run."""
    return lambda name, r: say(f"repeat {r + 1}/{repeats}: {name} done")


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
    return (
        f"TensorFlow {tf.__version__}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPU cores ({cpu}), load average {load:.1f} at start"
    )


def rate(x: float) -> str:
    """examples/s for tables: 123,456."""
    return f"{x:,.0f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; the first column left-aligned, the others right-aligned."""
    align = ["---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def spread(stat: Stat, fmt: Any = rate) -> str:
    """median [min-max] of a tfperf.measure.Stat."""
    return f"{fmt(stat.median)} [{fmt(stat.min)}-{fmt(stat.max)}]"


def paired(c: Comparison, pct: bool = False) -> str:
    """A comparison's median of paired ratios with their range: 1.23x [1.10-1.31], or as a
    percentage (a fraction of a limit): 71% [68%-74%]."""
    if pct:
        return f"{c.ratio:.0%} [{c.low:.0%}-{c.high:.0%}]"
    return f"{c.ratio:.2f}x [{c.low:.2f}-{c.high:.2f}]"


def run_at(
    examples_per_s: float,
    steps: int,
    batch: int,
    cpu_us_per_example: float = 0.0,
    input_bound_fraction: float = 0.0,
) -> Run:
    """A `Run` of `steps` batches at a rate some other part measured (tfperf train's
    result, the train loop's compute limit): its seconds follow from the rate."""
    examples = steps * batch
    seconds = examples / examples_per_s if examples_per_s > 0 else 0.0
    return Run(
        seconds,
        steps,
        examples,
        cpu_us_per_example * examples / 1e6,
        input_bound_fraction * seconds,
    )


Mark = tuple[int, float, float, float]  # (step, wall clock, process CPU time, input wait so far)


def window(marks: Sequence[Mark], batch: int, start: int, end: int | None = None) -> Run:
    """The `Run` between the first mark at or after step `start` (never the first mark: it
    ends the compiling call) and the last mark at or before `end`."""
    first = next(i for i, m in enumerate(marks) if m[0] >= start and i >= 1)
    last = max(i for i, m in enumerate(marks) if end is None or m[0] <= end)
    first = min(first, last - 1)  # a short run (--batches): at least one call's window
    (s0, t0, c0, w0), (s1, t1, c1, w1) = marks[first], marks[last]
    return Run(t1 - t0, s1 - s0, (s1 - s0) * batch, c1 - c0, w1 - w0)


def train_clock() -> Any:
    """A tfperf train hook noting a `Mark` after every loop call (in `.marks`), for
    `window`: end-to-end rates are wall-clock between loop calls, so the loop's own work
    between calls counts."""
    from tfperf.hooks import Hook

    class Clock(Hook):
        def __init__(self) -> None:
            self.marks: list[Mark] = []
            self.wait = 0.0

        def on_loop_end(self, run: Any, step: int, logs: dict[str, float]) -> None:
            self.wait += logs["input/wait_ms"] * logs["steps"] / 1e3
            self.marks.append((step, time.perf_counter(), time.process_time(), self.wait))

    return Clock()


def tfperf_exe() -> str:
    """The `tfperf` script of this interpreter's environment (.venv/bin/tfperf)."""
    exe = Path(sys.executable).parent / "tfperf"
    if not exe.exists():
        sys.exit(f"{exe}: tfperf is not installed in this environment (make test sets it up)")
    return str(exe)


def start_tfperf(
    args: Sequence[str], logs: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Any:
    """A real `tfperf ARGS` in the background, in a process group of its own (its worker
    processes join it, so one killpg reaches them all); stdout and stderr go to
    LOGS.out and LOGS.err."""
    import subprocess

    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    with open(f"{logs}.out", "w") as out, open(f"{logs}.err", "w") as err:
        return subprocess.Popen(
            [tfperf_exe(), *args],
            cwd=cwd,
            env=full_env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def finish_tfperf(proc: Any, logs: Path, timeout: float = 900) -> tuple[int, str, str]:
    """Waits for a `start_tfperf` process: (exit status, stdout, stderr)."""
    code = proc.wait(timeout=timeout)
    return code, Path(f"{logs}.out").read_text(), Path(f"{logs}.err").read_text()


def kill_group_at(proc: Any, seconds: float, started: float) -> bool:
    """SIGKILL to `proc`'s whole process group `seconds` after `started` (a
    time.monotonic()); False when it had ended by then (nothing killed)."""
    import signal

    while time.monotonic() < started + seconds:
        if proc.poll() is not None:
            return False
        time.sleep(min(0.01, max(0.0, started + seconds - time.monotonic())))
    if proc.poll() is not None:
        return False
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the command and every process it started
    except ProcessLookupError:
        return False  # the whole group ended just now
    proc.wait()
    return True


def last_error(stderr: str) -> str:
    """The `error:` paragraph a failed tfperf command printed (else its last line)."""
    text = " ".join(stderr.split())
    at = text.rfind("error:")
    return text[at:] if at >= 0 else (stderr.strip().splitlines() or [""])[-1]


def start_hogs(n: int) -> list[subprocess.Popen]:
    """`n` busy Python processes (a host with other work running), killed by stop_hogs."""
    if n:
        say(f"starting {n} CPU hogs")
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for proc in hogs:
        proc.kill()
    for proc in hogs:
        proc.wait()
