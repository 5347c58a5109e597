"""The evaluator as a child process of training (`tfperf train --evaluator`): starting it
on the CPU with its output in {out_dir}/logs/evaluator.log, ending it with the run, and
its entry point, `python -m tfperf.train.evaluator_process RUNFILE --parent-pid PID`,
which watches the run's checkpoints until the FINAL one or until the trainer is gone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.checkpoints_dir import run_dirs

MODULE = "tfperf.train.evaluator_process"  # what the child runs (`python -m MODULE`)
# Seconds the trainer waits, after a normal end, for the evaluator to finish the last
# checkpoint; then (or at once after an abnormal end) it is stopped.
FINISH_TIMEOUT = 600
TERMINATE_TIMEOUT = 30


def spawn_evaluator(
    runfile: str, overrides: Sequence[str], *, log_path: str | Path | None = None
) -> subprocess.Popen:
    """Starts the watching evaluator for RUNFILE (with the same --set values) as a child
    process on the CPU (GPUs hidden before TensorFlow loads), logging to
    {out_dir}/logs/evaluator.log by default. It exits by itself after the FINAL
    checkpoint, or when this process exits."""
    if log_path is None:
        log_path = run_dirs(load_config(runfile, list(overrides))).log_dir / "evaluator.log"
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", MODULE, str(runfile), "--parent-pid", str(os.getpid())]
    for item in overrides:
        cmd += ["--set", item]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    with log_path.open("ab") as log:
        return subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )


def finish_evaluator(child: subprocess.Popen | None, *, normal: bool) -> None:
    """After a normal end the evaluator sees FINAL, evaluates the last checkpoint and exits;
    otherwise it would watch forever, so it is stopped."""
    if child is None:
        return
    if normal:
        try:
            child.wait(timeout=FINISH_TIMEOUT)
            return
        except subprocess.TimeoutExpired:
            pass
    child.terminate()
    try:
        child.wait(timeout=TERMINATE_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m {MODULE}",
        description="Evaluate each new checkpoint of a training run until its FINAL one.",
    )
    p.add_argument("runfile", help="the run file the trainer reads")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--parent-pid", type=int, default=None, help="exit when this process exits")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Watches the run's checkpoints; returns the exit status (2 for a user's mistake)."""
    args = _parser().parse_args(argv)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the CPU only: never compete with training
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # The watcher (and TensorFlow with it) is imported after the GPUs are hidden.
    from tfperf.train.evaluator import console
    from tfperf.train.watch import watch

    try:
        cfg = load_config(args.runfile, args.overrides)
        records = watch(cfg, parent_pid=args.parent_pid, log=True)
        console.print(f"evaluator: evaluated {len(records)} checkpoint(s)")
    except (UserError, FileNotFoundError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
