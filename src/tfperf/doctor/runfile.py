"""Run-file changes for `tfperf doctor --fix`: which settings are worth trying for a
diagnosis, a run file with some of them applied, and where the optimized run file goes
(with its relative paths rewritten to name the same files from there). Nothing is timed
here; fixes.py tries the changes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from tfperf.config import config_from_dict
from tfperf.doctor.findings import Diagnosis

# Run-file keys that hold paths relative to the run file's folder (see RunConfig.resolve).
PATH_KEYS = (
    "data.dir",
    "train.out_dir",
    "train.init_from",
    "train.cluster",
    "pipeline.cache_records",
    "pipeline.cache_preprocessed",
)


def default_output(runfile: str | None, cfg: Any) -> Path:
    """RUNFILE.optimized.yaml next to the run file, or ./doctor.optimized.yaml."""
    if runfile:
        return Path(runfile).with_suffix(".optimized.yaml")
    return Path("doctor.optimized.yaml")


def relocate_paths(cfg: Any, out: Path) -> Any:
    """A copy of `cfg` whose relative paths name the same files from `out`'s folder: they
    were relative to cfg.source's folder (the working directory for a run file built in
    memory), now they are relative to where the optimized run file is written; absolute
    when the two folders share nothing but the file system's root."""
    base = Path(cfg.source).parent if cfg.source else Path.cwd()
    folder = Path(out).resolve().parent
    new = cfg.model_copy(deep=True)
    for key in PATH_KEYS:
        section, name = key.split(".")
        value = getattr(getattr(new, section), name)
        if not isinstance(value, str) or not value or Path(value).is_absolute():
            continue  # unset, a flag (cache in RAM), or already absolute
        target = (base / value).resolve()
        try:
            shared = Path(os.path.commonpath([target, folder]))
            moved = (
                str(target) if shared == Path(shared.anchor) else os.path.relpath(target, folder)
            )
        except ValueError:  # another drive (Windows): only an absolute path works
            moved = str(target)
        setattr(getattr(new, section), name, moved)
    new.source = cfg.source
    return new


def run_file_candidates(cfg: Any, diag: Diagnosis) -> list[tuple[str, dict[str, Any]]]:
    """(name, {dotted key: value}) run-file changes worth trying, most promising first."""
    p = cfg.pipeline
    codes = [f.code for f in diag.findings]
    cands: list[tuple[str, dict[str, Any]]] = []
    if cfg.workload and cfg.data.variant == "original":
        cands.append(("tuned pipeline", {"data.variant": "tuned"}))
    if p.parse != "batched":
        cands.append(("batched parse", {"pipeline.parse": "batched"}))
    if p.preprocess_parallelism != "auto":
        cands.append(("parallel preprocessing", {"pipeline.preprocess_parallelism": "auto"}))
    if p.read_parallelism != "auto" or p.interleave_cycle != "auto":
        reads = {"pipeline.read_parallelism": "auto", "pipeline.interleave_cycle": "auto"}
        cands.append(("parallel reads", reads))
    if p.prefetch != "auto":
        cands.append(("prefetch", {"pipeline.prefetch": "auto"}))
    if p.deterministic is not False:
        cands.append(("non-deterministic order", {"pipeline.deterministic": False}))
    if not p.cache_records:
        cands.append(("cache records", {"pipeline.cache_records": True}))
    if not p.cache_preprocessed and "no_cache" in codes:
        cands.append(("cache preprocessed", {"pipeline.cache_preprocessed": True}))
    for f in diag.findings:
        if f.code == "precision":
            best = f.change.split(":", 1)[1].split()[0]
            cands.append((f"precision {best}", {"train.precision": best}))
        if f.code == "small_batch":
            cands.append(("larger batch", {"pipeline.batch_size": diag.batch_size * 4}))
    return cands


def apply_changes(cfg: Any, changes: dict[str, Any]) -> Any:
    """A copy of `cfg` with the dotted keys of `changes` set (validated as a run file)."""
    data = cfg.model_dump(mode="json", exclude={"source"})
    new = config_from_dict(data, [f"{k}={_yaml(v)}" for k, v in changes.items()])
    new.source = cfg.source
    return new


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def describe_changes(changes: dict[str, Any]) -> str:
    """'pipeline.parse: batched, pipeline.prefetch: auto'."""
    return ", ".join(f"{k}: {v}" for k, v in changes.items())
