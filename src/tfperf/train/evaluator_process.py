"""The evaluator as a child process of training (`tfperf train --evaluator`): starting it
on the CPU with its output in {out_dir}/logs/evaluator.log, saying when it dies, ending it
with the run (its exit status and last result are the run's `EvaluatorOutcome`), and
its entry point, `python -m tfperf.train.evaluator_process RUNFILE --parent-pid PID`,
which watches the run's checkpoints until the FINAL one or until the trainer is gone.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.hooks import Hook, RunState
from tfperf.train.checkpoints.folder import run_dirs
from tfperf.train.checkpoints.save import CheckpointHook
from tfperf.train.eval_outputs import last_record
from tfperf.util.format import shell_command
from tfperf.util.startup import lean_tensorflow_import

MODULE = "tfperf.train.evaluator_process"  # what the child runs (`python -m MODULE`)
# Seconds the trainer waits, after a normal end, for the evaluator to finish the last
# checkpoint; then (or at once after an abnormal end) it is stopped.
FINISH_TIMEOUT = 600
TERMINATE_TIMEOUT = 30


def spawn_evaluator(
    runfile: str, overrides: Sequence[str], *, log_path: str | Path | None = None
) -> subprocess.Popen[bytes]:
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


def finish_evaluator(child: subprocess.Popen[bytes], *, normal: bool) -> tuple[int | None, bool]:
    """After a normal end the evaluator sees FINAL, evaluates the last checkpoint and exits;
    otherwise it would watch forever, so it is stopped. Returns (its exit status, whether
    it was stopped here)."""
    if normal:
        try:
            return child.wait(timeout=FINISH_TIMEOUT), False
        except subprocess.TimeoutExpired:
            pass
    if child.poll() is not None:
        return child.returncode, False  # it had ended by itself
    child.terminate()
    try:
        child.wait(timeout=TERMINATE_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
    return child.wait(), True


@dataclass
class EvaluatorOutcome:
    """How the evaluator beside a training run ended, and its last result."""

    exit_code: int | None
    stopped: bool  # stopped by the trainer (training did not end normally)
    error: str | None  # its last error line, when it failed
    last: dict[str, Any] | None  # its last line of eval_results.jsonl from this run
    log: str

    @property
    def failed(self) -> bool:
        return not self.stopped and self.exit_code != 0

    def describe(self) -> str:
        """'step N: loss=..., mae=...' or why there is no result."""
        if self.failed:
            return f"failed (exit status {self.exit_code}): {self.error or 'see ' + self.log}"
        if self.last is None:
            return "no checkpoint evaluated" + (" (stopped with training)" if self.stopped else "")
        metrics = ", ".join(f"{k}={v:.5g}" for k, v in self.last.get("metrics", {}).items())
        best = " (best)" if self.last.get("best") else ""
        return f"step {self.last.get('step')}: {metrics}{best}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "failed": self.failed, "summary": self.describe()}


def _last_error(log_path: Path, offset: int) -> str | None:
    """The last 'error:' line the evaluator logged since `offset`, else its last line (a
    traceback's last line names the exception)."""
    try:
        with log_path.open("rb") as f:
            f.seek(offset)
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines()]
    except OSError:
        return None
    lines = [ln for ln in lines if ln]
    errors = [ln for ln in lines if ln.startswith("error:")]
    last = errors or lines
    return last[-1] if last else None


class EvaluatorChild(Hook):
    """The evaluator process beside a training run: says once if it dies while training
    goes on, and at the end is awaited (or stopped) into `outcome`."""

    def __init__(self, runfile: str, overrides: Sequence[str], out_dir: Path, log_dir: Path):
        self.runfile, self.out_dir, self.log = runfile, out_dir, log_dir / "evaluator.log"
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        self.started = time.time()
        self.proc = spawn_evaluator(runfile, overrides, log_path=self.log)
        self.outcome: EvaluatorOutcome | None = None
        self._told = False

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        code = self.proc.poll()
        if code not in (None, 0) and not self._told:
            self._told = True
            Console(stderr=True).print(
                f"evaluator: exited with status {code} at training step {step}: "
                f"{_last_error(self.log, self.offset) or 'see ' + str(self.log)}; training "
                "goes on (evaluate its checkpoints later: "
                f"`{shell_command('tfperf', 'evaluate', self.runfile, '--watch', '--all')}`)",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        # After the checkpoint hook (earlier in the list) has written FINAL.
        code, stopped = finish_evaluator(
            self.proc, normal=run.stop_reason in CheckpointHook.NORMAL_ENDS
        )
        error = _last_error(self.log, self.offset) if code not in (0, None) else None
        last = last_record(self.out_dir, self.started)
        self.outcome = EvaluatorOutcome(code, stopped, error, last, str(self.log))


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
    with lean_tensorflow_import():
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
