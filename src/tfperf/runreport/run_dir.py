"""What tfperf leaves in a run folder (a run file's train.out_dir) and reading it back for
the report: `tfperf train`'s summary.json, `tfperf doctor`'s doctor.json, the TensorBoard
scalars of logs/train and logs/eval (or eval_results.jsonl), and for each part that is not
there, the command that makes it. The writers (train/, doctor/) take the names from here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.errors import UserError
from tfperf.runreport.events import Series, read_scalars
from tfperf.runreport.shapes import DOCTOR, SUMMARY, check_shape
from tfperf.util.files import write_text_atomic
from tfperf.util.format import cut, shell_command

SUMMARY_NAME = "summary.json"  # `tfperf train`: TrainResult.to_dict() and the run file
DOCTOR_NAME = "doctor.json"  # `tfperf doctor`: its --json dict and the run file
REPORT_NAME = "report.html"  # `tfperf report`'s default output
EVAL_RESULTS = "eval_results.jsonl"  # the evaluator's line per checkpoint (train/eval_outputs)
TRAIN_LOGS, EVAL_LOGS = Path("logs/train"), Path("logs/eval")
# What tfperf writes into a run folder: one of them makes a folder a run folder.
MARKERS = (SUMMARY_NAME, DOCTOR_NAME, "logs", "checkpoints", EVAL_RESULTS)


def save_json(path: Path, data: dict[str, Any]) -> Path:
    """`data` as JSON at `path`, written whole or not at all (the folder made if needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def save_summary(out_dir: Path, runfile: str | None, summary: dict[str, Any]) -> bool:
    """`tfperf train`'s summary as {out_dir}/summary.json; False when it cannot be written
    (training itself has succeeded: only the report will miss it)."""
    try:
        save_json(out_dir / SUMMARY_NAME, {"runfile": runfile, **summary})
    except OSError:
        return False
    return True


@dataclass
class RunRecord:
    """A run folder's parts as plain data; `missing` maps each part not found to a sentence
    saying what it is and which command makes it."""

    run_dir: Path | None = None
    summary: dict[str, Any] | None = None  # TrainResult.to_dict() (+ "runfile")
    doctor: dict[str, Any] | None = None  # {"runfile", "diagnosis", "fix"}
    train: dict[str, Series] = field(default_factory=dict)  # logs/train scalars by tag
    eval: dict[str, Series] = field(default_factory=dict)  # logs/eval scalars by tag
    missing: dict[str, str] = field(default_factory=dict)

    @property
    def runfile(self) -> str:
        for part in (self.doctor, self.summary):
            if part and part.get("runfile"):
                return str(part["runfile"])
        return "RUNFILE"


def _read_json(path: Path, spec: Any, writer: str) -> dict[str, Any] | None:
    """The JSON object at `path` (None when there is none), checked to be of the shape
    `spec` the report reads (shapes.py): else a UserError naming the file and the field."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path}: cannot be read as JSON ({cut(str(exc))}); it is written by tfperf: run "
            "the command that made it again, or delete it"
        ) from None
    check_shape(data, spec, path, writer)
    return data


def _eval_from_results(path: Path) -> dict[str, Series]:
    """Eval metrics by checkpoint step from eval_results.jsonl (a torn line is skipped)."""
    out: dict[str, dict[int, float]] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        try:
            rec = json.loads(line)
            for name, value in rec["metrics"].items():
                out.setdefault(name, {})[int(rec["step"])] = float(value)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return {name: sorted(by_step.items()) for name, by_step in out.items()}


def _not_a_run(run_dir: Path, why: str) -> UserError:
    inside = sorted(
        str(p) for p in run_dir.glob("*/") if p.is_dir() and any((p / m).exists() for m in MARKERS)
    )[:3]
    hint = f" Run folders inside it: {', '.join(inside)}." if inside else ""
    return UserError(
        f"{run_dir}: {why}; expected a run folder (a run file's train.out_dir) holding what "
        f"tfperf writes there: {SUMMARY_NAME} (`tfperf train RUNFILE`), {DOCTOR_NAME} (`tfperf "
        f"doctor RUNFILE`), {TRAIN_LOGS}/ and {EVAL_LOGS}/ (TensorBoard logs of training and of "
        f"`tfperf evaluate RUNFILE --watch`).{hint}"
    )


def read_run_dir(run_dir: str | Path) -> RunRecord:
    """Everything the report shows from `run_dir`; a folder that does not exist or holds
    nothing tfperf wrote is a UserError naming it and what was expected."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        why = "not a folder" if run_dir.exists() else "no such folder"
        raise _not_a_run(run_dir, why)
    if not any((run_dir / m).exists() for m in MARKERS):
        raise _not_a_run(run_dir, "holds nothing tfperf wrote")
    rec = RunRecord(run_dir=run_dir)
    rec.summary = _read_json(run_dir / SUMMARY_NAME, SUMMARY, "tfperf train RUNFILE")
    rec.doctor = _read_json(run_dir / DOCTOR_NAME, DOCTOR, "tfperf doctor RUNFILE")
    rec.train = read_scalars(run_dir / TRAIN_LOGS)
    rec.eval = read_scalars(run_dir / EVAL_LOGS) or _eval_from_results(run_dir / EVAL_RESULTS)
    rec.missing = missing_parts(rec)
    return rec


def missing_parts(rec: RunRecord) -> dict[str, str]:
    """{part: what it is and the command that makes it} for each part `rec` lacks."""
    run, out = shell_command(rec.runfile), {}
    here = "" if rec.run_dir is None else f" (its train.out_dir: {rec.run_dir})"
    if rec.summary is None:
        out["summary"] = (
            f"no training summary ({SUMMARY_NAME}): `tfperf train {run}`{here} writes it at "
            "the end of training"
        )
    if rec.doctor is None:
        out["doctor"] = (
            f"no diagnosis ({DOCTOR_NAME}: the verdict, the three rates, the stage prefixes "
            f"and the findings): run `tfperf doctor {run}`; with --fix also the trials"
        )
    elif skipped := rec.doctor.get("fix_skipped"):  # --fix ran and had no time for a trial
        out["fix"] = f"--fix tried nothing: {skipped}"
    elif not rec.doctor.get("fix"):
        out["fix"] = f"no --fix trials: run `tfperf doctor {run} --fix`"
    if not rec.train:
        out["train"] = (
            f"no training logs ({TRAIN_LOGS}: input wait and examples/s over the steps): "
            f"run `tfperf train {run}`"
        )
    if not rec.eval:
        out["eval"] = (
            f"no eval metrics ({EVAL_LOGS}: one point per checkpoint): run `tfperf evaluate "
            f"{run} --watch --all` after training, or `tfperf train {run} --evaluator`"
        )
    return out
