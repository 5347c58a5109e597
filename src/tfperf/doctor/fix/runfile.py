"""Run-file changes for `tfperf doctor --fix`: which settings are worth trying for a
diagnosis, a run file with some of them applied, and the optimized run file written where
it goes: the original's text with only the changed keys set (comments and order kept, by
ruamel.yaml's round trip) and its relative paths rewritten to name the same files from
there. Nothing is timed here; entry.py tries the changes."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import yaml

from tfperf.config import RunConfig, config_from_dict, dump_config
from tfperf.doctor.evidence.findings import Diagnosis
from tfperf.doctor.rules.cache import CACHE_PREPROCESSED, CACHE_RECORDS
from tfperf.doctor.rules.devices import MIRRORED
from tfperf.doctor.rules.model import LARGER_BATCH, XLA, fastest_batch
from tfperf.doctor.rules.parallel import (
    NONDETERMINISTIC,
    PARALLEL_PREPROCESSING,
    PARALLEL_READS_RUN_FILE,
)
from tfperf.doctor.rules.per_example import BATCHED_PARSE
from tfperf.doctor.rules.pipeline_end import PREFETCH_RUN_FILE
from tfperf.doctor.rules.steps_per_call import STEPS_PER_CALL
from tfperf.doctor.rules.threads import INPUT_THREADS, threads_variant
from tfperf.util.files import write_text_atomic

# Run-file keys that hold paths relative to the run file's folder (see RunConfig.resolve).
PATH_KEYS = (
    "data.dir",
    "train.out_dir",
    "train.init_from",
    "train.cluster",
    "pipeline.cache_records",
    "pipeline.cache_preprocessed",
)


def default_output(runfile: str | None, cfg: RunConfig) -> Path:
    """RUNFILE.optimized.yaml next to the run file, or ./doctor.optimized.yaml."""
    if runfile:
        return Path(runfile).with_suffix(".optimized.yaml")
    return Path("doctor.optimized.yaml")


def relocate_paths(cfg: RunConfig, out: Path) -> RunConfig:
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


def run_file_candidates(cfg: RunConfig, diag: Diagnosis) -> list[tuple[str, dict[str, Any]]]:
    """(name, {dotted key: value}) run-file changes worth trying, most promising first."""
    codes = [f.code for f in diag.findings]
    cands: list[tuple[str, dict[str, Any]]] = []
    # Not input-bound (and no doctor.target saying the accelerator will be): no input trial
    # can show a gain, and each would take its share of the budget.
    if getattr(diag, "input_trials", True):
        cands += _input_candidates(cfg, codes)
    cands += _compute_candidates(cfg, diag)
    return cands


NO_INPUT_TRIALS = (
    "not input-bound: no input change tried (the model sets the pace here; --target "
    "EXAMPLES_PER_S judges the pipeline against a faster accelerator)"
)


def _input_candidates(cfg: RunConfig, codes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    p = cfg.pipeline
    cands: list[tuple[str, dict[str, Any]]] = []
    if cfg.workload and cfg.data.variant == "original":
        cands.append(("tuned pipeline", {"data.variant": "tuned"}))
    if p.parse != "batched":
        cands.append((BATCHED_PARSE.label, {"pipeline.parse": "batched"}))
    if p.preprocess_parallelism != "auto":
        cands.append((PARALLEL_PREPROCESSING.label, {"pipeline.preprocess_parallelism": "auto"}))
    if p.read_parallelism != "auto" or p.interleave_cycle != "auto":
        reads = {"pipeline.read_parallelism": "auto", "pipeline.interleave_cycle": "auto"}
        cands.append((PARALLEL_READS_RUN_FILE.label, reads))
    if p.prefetch != "auto":
        cands.append((PREFETCH_RUN_FILE.label, {"pipeline.prefetch": "auto"}))
    if p.deterministic is True:  # null is already false in training: nothing to try
        cands.append((NONDETERMINISTIC.label, {"pipeline.deterministic": False}))
    if not p.cache_records:
        cands.append((CACHE_RECORDS.label, {"pipeline.cache_records": True}))
    if not p.cache_preprocessed and "no_cache" in codes:
        cands.append((CACHE_PREPROCESSED.label, {"pipeline.cache_preprocessed": True}))
    return cands


def _compute_candidates(cfg: RunConfig, diag: Diagnosis) -> list[tuple[str, dict[str, Any]]]:
    cands: list[tuple[str, dict[str, Any]]] = []
    # Precision and batch size change the results: tried only with the user's leave
    # (doctor.allow, --allow); the others keep them up to rounding.
    allow = set(cfg.doctor.allow)
    for f in diag.findings:
        if f.code == "precision" and "precision" in allow:
            best = f.change.split(":", 1)[1].split()[0]
            cands.append((f"precision {best}", {"train.precision": best}))
        if f.code == "xla":
            cands.append((XLA.label, {"train.jit_compile": True}))
        if f.code == "steps_per_call":
            cands.append((STEPS_PER_CALL.label, {"train.steps_per_loop": "auto"}))
        if f.code == "input_threads" and (found := threads_variant(diag.variants)):
            cands.append((INPUT_THREADS.label, {"pipeline.threads": found[1]}))
        if f.code == "idle_devices":
            cands.append((MIRRORED.label, {"train.strategy": "mirrored"}))
        if f.code == "small_batch" and "batch" in allow:
            # The batch the finding measured fastest (2x or 4x).
            fastest = fastest_batch(diag.variants)
            bigger = fastest[1] if fastest else diag.batch_size * 4
            cands.append((LARGER_BATCH.label, {"pipeline.batch_size": bigger}))
    return cands


# Findings whose change alters the results (what the model computes or sees per step),
# by the doctor.allow name that lets --fix apply them.
CHANGES_RESULTS = {"precision": "precision", "small_batch": "batch"}


def withheld(cfg: RunConfig, diag: Diagnosis, *, run_file: bool = True) -> list[str]:
    """The findings --fix did not apply because they change the results and doctor.allow
    does not allow them (`run_file`: say how to allow it; else only what to change)."""
    allow = set(cfg.doctor.allow)
    out = []
    for f in diag.findings:
        what = CHANGES_RESULTS.get(f.code)
        if what is None or (run_file and what in allow):
            continue
        how = f"; allow it with --allow {what} (doctor.allow: [{what}])" if run_file else ""
        out.append(f"{f.code}: not applied, it changes the results ({f.change}){how}")
    return out


# A compile change is advised when its finding expects training this much faster: an input-
# bound run's steps per call read ~1.0x, and `optimize` printed it under "nothing helped".
COMPILE_GAIN = 1.05


def compile_kwargs(diag: Diagnosis, steps_per_call: int) -> dict[str, Any]:
    """The measured compute findings that keep the results and expect training faster, as
    keyword arguments of model.compile for a model.fit user: XLA, more steps per call."""
    codes = {f.code for f in diag.findings if (f.expected_speedup or 0.0) >= COMPILE_GAIN}
    out: dict[str, Any] = {}
    if "xla" in codes:
        out["jit_compile"] = True
    if "steps_per_call" in codes:
        out["steps_per_execution"] = steps_per_call
    return out


def apply_changes(cfg: RunConfig, changes: dict[str, Any]) -> RunConfig:
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


def write_run_file(cfg: RunConfig, changes: dict[str, Any], out: Path, header: str) -> None:
    """`header` then cfg's run file with the dotted keys of `changes` set and its relative
    paths relocated to `out`'s folder; everything else (comments, order, keys left at their
    defaults) as the user wrote it. A run file built in memory is written in full."""
    relocated = relocate_paths(cfg, out)
    moves = {
        key: _get(relocated, key)
        for key in PATH_KEYS
        if _get(relocated, key) != _get(cfg, key) and key not in changes
    }
    if cfg.source and Path(cfg.source).is_file():
        text = edit_yaml(Path(cfg.source).read_text(), {**changes, **moves})
        given = sorted(set(cfg._overrides.values()))
        if given:  # the file is the user's text: what --set changed for this run is not in it
            header += f"#   not included: --set {' --set '.join(given)}\n"
    else:
        text = dump_config(relocate_paths(apply_changes(cfg, changes), out))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, header + text)


def _get(cfg: RunConfig, key: str) -> Any:
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def edit_yaml(text: str, changes: dict[str, Any]) -> str:
    """YAML `text` with each dotted key of `changes` set (sections made when missing),
    comments, key order and quoting kept."""
    from ruamel.yaml import YAML  # the round trip is only needed when writing

    rt = YAML()
    rt.preserve_quotes = True
    rt.width = 4096  # a long path stays on its line
    data = rt.load(text) or {}
    for key, value in changes.items():
        *sections, name = key.split(".")
        node = data
        for part in sections:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[name] = value
    buf = io.StringIO()
    rt.dump(data, buf)
    return buf.getvalue()
