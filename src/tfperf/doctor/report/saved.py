"""What `tfperf doctor` leaves in the run folder for `tfperf report`: its --json dict and the
run file, written whole as {train.out_dir}/doctor.json (a later doctor replaces it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfperf.config import RunConfig
from tfperf.runreport.run_dir import DOCTOR_NAME, save_json
from tfperf.train.checkpoints.folder import run_dirs


def save_result(cfg: RunConfig, data: dict[str, Any]) -> tuple[Path, str | None]:
    """(the path of doctor.json, None) once written; (that path, why) when the folder cannot
    be written: the doctor's own report on stdout does not depend on it."""
    path = run_dirs(cfg).out_dir / DOCTOR_NAME
    try:
        save_json(path, {"runfile": cfg.source, **data})
    except OSError as exc:
        return path, f"{type(exc).__name__}: {exc}"
    return path, None
