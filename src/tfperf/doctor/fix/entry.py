"""The entry of `tfperf doctor --fix` on a run file: for a data.pipeline function the
dataset path (dataset.py) and the module applying its kept rewrites; for tfperf's own
pipeline the run-file changes (runfile.py) tried in turn (trials.py), then the optimized
run file written with only the changed keys, a header saying what each trial measured. When
the optimized pipeline is not faster than the original, nothing is kept or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfperf.config import RunConfig
from tfperf.doctor.evidence.findings import Diagnosis
from tfperf.doctor.fix.dataset import fix_dataset
from tfperf.doctor.fix.pipeline_file import code_edits, write_optimized_pipeline
from tfperf.doctor.fix.predicted import predict
from tfperf.doctor.fix.runfile import (
    NO_INPUT_TRIALS,
    run_file_candidates,
    withheld,
    write_run_file,
)
from tfperf.doctor.fix.trials import (
    FixResult,
    FixTrial,
    Tick,
    final_check,
    shared_targets,
    trial_probe,
    try_changes,
)
from tfperf.doctor.probes.budget import FIX_CLOCK, FIX_SECONDS, Budget
from tfperf.doctor.probes.budget import fix_clock as _clocked
from tfperf.inputs.datasets import make_input_dataset
from tfperf.measure import Probe


@shared_targets()  # one train step per model for all the trials
def fix_pipeline(
    cfg: RunConfig,
    diag: Diagnosis,
    *,
    out: Path,
    tick: Tick | None = None,
    budget: Budget | None = None,
) -> FixResult:
    """Tries each candidate change, keeps those that help and writes them: the run file
    with only the changed keys (comments kept) and, for a data.pipeline function, the
    module applying the kept rewrites to it (pipeline_file.py). Nothing kept: nothing
    written. `budget` bounds the time (FIX_SECONDS by default)."""
    tick = tick or (lambda label: None)
    budget = budget or Budget(FIX_SECONDS)
    if cfg.data.pipeline:
        ds = make_input_dataset(cfg, training=True)
        result = fix_dataset(cfg, diag, ds, tick=tick, budget=budget)
        header = yaml_header(result)
        result.code_edits = code_edits(cfg, result.pipeline_changes, result.dataset)
        result.written = write_optimized_pipeline(cfg, result, out, header)
        result.withheld = withheld(cfg, diag)
        return result
    cands = run_file_candidates(cfg, diag)
    token = _clocked(budget, len(cands), cfg.doctor.repeats)
    try:
        result = _fix_run_file(cfg, diag, out, tick, cands)
    finally:
        FIX_CLOCK.reset(token)
    result.withheld = withheld(cfg, diag)
    return result


def _fix_run_file(
    cfg: RunConfig,
    diag: Diagnosis,
    out: Path,
    tick: Tick,
    cands: list[tuple[str, dict[str, Any]]],
) -> FixResult:
    def probe(c: RunConfig, name: str) -> Probe:
        return trial_probe(name, c, make_input_dataset(c, training=True), c.pipeline.batch_size)

    trials: list[FixTrial] = []
    if not diag.input_trials:
        trials.append(FixTrial("input changes", NO_INPUT_TRIALS, None, False, "not input-bound"))
    best_cfg, kept = try_changes(cands, cfg, probe, tick, trials)
    predicted = predict(trials, diag)
    optimized = (lambda n: probe(best_cfg, n)) if kept else None
    outcome = final_check(lambda n: probe(cfg, n), optimized, cfg.doctor, tick, trials)
    if not outcome.keep:
        best_cfg, kept = cfg, {}
    result = FixResult(
        outcome.before,
        outcome.after,
        trials,
        [],
        run_file_changes=kept,
        check=outcome.check,
        predicted=predicted if outcome.keep else None,
    )
    outcome.into(result)
    if kept:  # nothing kept: nothing written (the report says so)
        write_run_file(cfg, kept, out, yaml_header(result))
        result.written.append(str(out))
    return result


def yaml_header(result: FixResult) -> str:
    """The optimized run file's header: the report's headline and each trial's row, the
    same figures as the CLI, --json and HTML show."""
    lines = [f"# written by `tfperf doctor --fix`: {result.headline}"]
    for t in result.trials:
        row = t.row()
        numbers = row["note"]  # not timed: failed or not applicable
        if t.ratio is not None:
            numbers = (
                f"{row['examples_per_s_text']} ex/s, {row['ratio_text']} of the best so far; "
                f"{row['note']}"
            )
        lines.append(f"#   {row['status']}: {t.change} ({numbers})")
    return "\n".join(lines) + "\n"
