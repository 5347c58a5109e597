"""What the watching evaluator writes for a run: TensorBoard scalars in logs/eval at each
checkpoint's step (the tags training writes in logs/train: loss, accuracy, ...), a line per
evaluated checkpoint in eval_results.jsonl, and best/ (a whole copy of the best checkpoint
by eval.metric and eval.mode). Never writes into checkpoints/.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.train.checkpoints.disk_full import disk_full_named
from tfperf.train.checkpoints.folder import STATE_FILE
from tfperf.util.format import quoted

RESULTS_NAME = "eval_results.jsonl"
BEST_DIR = "best"


def check_eval_metric(cfg: RunConfig, names: list[str]) -> None:
    """eval.metric (which chooses best/) must be the loss or one of the metrics computed."""
    if cfg.eval.metric not in names:
        raise UserError(
            f"eval.metric: expected one of {sorted(names)}, found {quoted(cfg.eval.metric)}; "
            f"set it in {cfg.origin('eval.metric')} (model.metrics lists the metrics computed)"
        )


def last_record(out_dir: Path, since: float = 0.0) -> dict[str, Any] | None:
    """The last line of {out_dir}/eval_results.jsonl written at or after `since` (time.time())."""
    try:
        lines = (out_dir / RESULTS_NAME).read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line from a killed evaluator
        return rec if float(rec.get("time", 0.0)) >= since else None
    return None


@dataclass
class EvalRecord:
    """One evaluated checkpoint: a line of eval_results.jsonl."""

    step: int
    checkpoint: str
    metrics: dict[str, float]
    skipped: int = 0  # newer checkpoints passed over to catch up (0 with all_checkpoints)
    seconds: float = 0.0  # evaluation time
    examples: int = 0
    best: bool = False  # this checkpoint became best/
    time: float = field(default_factory=time.time)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class EvalOutputs:
    """TensorBoard scalars (logs/eval), eval_results.jsonl and best/ of one run."""

    def __init__(self, cfg: RunConfig, out_dir: Path, log_dir: Path):
        # TensorFlow is imported on first use so that `tfperf --help` stays fast.
        import tensorflow as tf

        self.cfg = cfg
        self.out_dir = out_dir
        self.results = out_dir / RESULTS_NAME
        self.best_dir = out_dir / BEST_DIR
        log_dir.mkdir(parents=True, exist_ok=True)
        self.writer = tf.summary.create_file_writer(str(log_dir))
        self.best = self._read_best()

    def _read_best(self) -> dict[str, Any] | None:
        try:
            best = json.loads((self.best_dir / "best.json").read_text())
        except (OSError, ValueError):
            return None
        # A best/ chosen by another metric or mode says nothing about this one.
        if best.get("metric") != self.cfg.eval.metric or best.get("mode") != self.cfg.eval.mode:
            return None
        return best

    def evaluated_steps(self) -> list[int]:
        """Steps already in eval_results.jsonl (a restarted evaluator does not redo them)."""
        try:
            lines = self.results.read_text().splitlines()
        except OSError:
            return []
        steps = []
        for line in lines:
            try:
                steps.append(int(json.loads(line)["step"]))
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a killed evaluator
        return steps

    def write(self, record: EvalRecord, source: str | None = None) -> None:
        """Writes the record; best/ is copied from `source` (a held copy of the checkpoint,
        train/checkpoints/held.py) when given, else from record.checkpoint."""
        check_eval_metric(self.cfg, list(record.metrics))  # before anything is written
        fix = "set train.out_dir to a folder on another disk"
        with disk_full_named("evaluator: writing results", self.out_dir, fix):
            self._write(record, source)

    def _write(self, record: EvalRecord, source: str | None) -> None:
        import tensorflow as tf

        with self.writer.as_default():
            for name, value in record.metrics.items():
                # Training's tags in another run folder: TensorBoard draws both on one chart.
                tf.summary.scalar(name, value, step=record.step)
        self.writer.flush()
        record.best = self._update_best(record, source)
        with self.results.open("a") as f:
            f.write(record.to_json() + "\n")

    def _update_best(self, record: EvalRecord, source: str | None) -> bool:
        metric, mode = self.cfg.eval.metric, self.cfg.eval.mode
        value = record.metrics[metric]
        if self.best is not None:
            old = float(self.best["value"])
            if (value >= old) if mode == "min" else (value <= old):
                return False
        self._copy_best(record, value, Path(source or record.checkpoint))
        return True

    def _copy_best(self, record: EvalRecord, value: float, files: Path) -> None:
        """Copies the checkpoint's files into best/ via a temp dir and renames, so best/
        always holds one whole checkpoint."""
        src = Path(record.checkpoint)
        tmp = self.out_dir / f".{BEST_DIR}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            for f in files.parent.iterdir():
                if f.name == src.name + ".index" or f.name.startswith(src.name + ".data-"):
                    shutil.copy2(f, tmp / f.name)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # a full disk leaves no partial copy behind
            raise
        # A state file makes tf.train.latest_checkpoint(best/) work.
        (tmp / STATE_FILE).write_text(
            f'model_checkpoint_path: "{src.name}"\nall_model_checkpoint_paths: "{src.name}"\n'
        )
        self.best = {
            "metric": self.cfg.eval.metric,
            "mode": self.cfg.eval.mode,
            "value": value,
            "step": record.step,
            "checkpoint": src.name,
            "source": str(src),
        }
        (tmp / "best.json").write_text(json.dumps(self.best, indent=2) + "\n")
        old = self.out_dir / f".{BEST_DIR}.old-{os.getpid()}"
        if self.best_dir.exists():
            os.replace(self.best_dir, old)
        os.replace(tmp, self.best_dir)
        shutil.rmtree(old, ignore_errors=True)
