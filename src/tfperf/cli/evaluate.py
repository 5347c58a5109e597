"""`tfperf evaluate`: the separate evaluator. Once: the newest (or a given) checkpoint's eval
metrics. With --watch: every new checkpoint of a running training until its FINAL one, in
a process of its own on the CPU. The work is in tfperf.train (evaluator.py, watch.py)."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from tfperf.cli.common import (
    JsonOpt,
    RunFileArg,
    SetOpt,
    load_run,
    print_json,
    stdout_console,
    user_errors,
)
from tfperf.config import RunConfig
from tfperf.errors import UserError


def _hide_gpus() -> None:
    """The evaluator runs on the CPU so that it never competes with training for the GPU."""
    if "tensorflow" not in sys.modules:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # effective only before TF loads
        return
    import tensorflow as tf

    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # devices already initialised (e.g. called inside a test process)
        pass


@user_errors
def evaluate(
    runfile: RunFileArg = None,
    overrides: SetOpt = None,
    watch_: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Keep evaluating each new checkpoint of the run until the "
            "FINAL one (written when training ends normally), then exit. Writes TensorBoard "
            "scalars to logs/eval (training's tags: loss, accuracy, ...), eval_results.jsonl "
            "and best/ in train.out_dir.",
        ),
    ] = False,
    all_: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Evaluate every checkpoint instead of jumping to the newest "
            "when behind (with --watch), or every checkpoint on disk (without).",
        ),
    ] = False,
    checkpoint: Annotated[
        str | None,
        typer.Option(
            "--checkpoint",
            help="A ckpt-N prefix or a folder of checkpoints to "
            "evaluate once; default: the newest in train.out_dir/checkpoints.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonOpt = False,
    poll: Annotated[
        float, typer.Option("--poll", min=0.05, help="Seconds between looks for new checkpoints.")
    ] = 2.0,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0,
            help="With --watch: stop after this many seconds "
            "even if no FINAL marker came (default: wait for it).",
            show_default=False,
        ),
    ] = None,
    max_batches: Annotated[
        int | None,
        typer.Option(
            "--max-batches",
            min=1,
            help="Evaluate at most this many batches per "
            "checkpoint (debug limit; overrides eval.steps).",
            show_default=False,
        ),
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option("--max-steps", min=1, hidden=True, help="Old name of --max-batches."),
    ] = None,
    gpu: Annotated[
        bool, typer.Option("--gpu", help="With --watch: let the evaluator use GPUs (default: CPU).")
    ] = False,
    parent_pid: Annotated[
        int | None,
        typer.Option(
            "--parent-pid", hidden=True, help="Exit when this process (the trainer) exits."
        ),
    ] = None,
) -> None:
    """Evaluate a run's checkpoints with the run file's eval data, separately from training.

    Prints loss and metrics; without --watch nothing is written. With --watch, eval.metric
    and eval.mode choose best/.
    """
    if watch_ and not gpu:
        _hide_gpus()
    max_batches = max_batches or max_steps
    cfg = load_run(runfile, overrides)
    if watch_:
        if checkpoint:
            raise UserError("--checkpoint: not with --watch (it follows train.out_dir)")
        # The watcher (and TensorFlow with it) is imported on first use: `--help` stays fast.
        from tfperf.train.evaluator import console as log  # lines stay whole in a log file
        from tfperf.train.watch import watch

        records = watch(
            cfg,
            all_checkpoints=all_,
            poll=poll,
            timeout=timeout,
            max_batches=max_batches,
            parent_pid=parent_pid,
            progress=not json_out,
            log=True,
        )
        if json_out:
            print_json([r.__dict__ for r in records])
        else:
            log.print(f"evaluator: evaluated {len(records)} checkpoint(s)")
    else:
        _once(cfg, all_, checkpoint, max_batches, json_out)


def _once(
    cfg: RunConfig, all_: bool, checkpoint: str | None, max_batches: int | None, json_out: bool
) -> None:
    from tfperf.train.checkpoints.folder import ready_checkpoints, resolve_prefix
    from tfperf.train.evaluator import Evaluator, run_paths

    _, ckpt_dir, _ = run_paths(cfg)
    if checkpoint and not all_:
        prefixes = [resolve_prefix(checkpoint)]
    else:
        prefixes = [c.path for c in ready_checkpoints(checkpoint or ckpt_dir)]
    if not prefixes:
        where = cfg.source or "the defaults"
        raise UserError(
            f"{checkpoint or ckpt_dir}: no finished checkpoint yet (train.out_dir of "
            f"{where}); run `tfperf train` first"
        )
    evaluator = Evaluator(cfg, max_batches=max_batches, progress=not json_out)
    rows = _rows(evaluator, prefixes, all_)
    if json_out:
        print_json(rows if all_ else rows[0])
        return
    names = list(rows[0]["metrics"])
    table = Table(title=f"eval ({rows[0]['examples']} examples each)")
    table.add_column("step", justify="right")
    for n in names:
        table.add_column(n, justify="right")
    table.add_column("checkpoint")
    for r in rows:
        table.add_row(str(r["step"]), *(f"{r['metrics'][n]:.5g}" for n in names), r["checkpoint"])
    stdout_console().print(table)


def _rows(evaluator: Any, prefixes: list[str], all_: bool) -> list[dict[str, Any]]:
    """The newest checkpoint that reads (a damaged newer one is named and skipped), or with
    --all every one that reads; none readable is a DamagedCheckpointError (exit 2)."""
    from tfperf.train.checkpoints.damaged import DamagedCheckpointError, read_newest

    fix = "evaluate another one with --checkpoint PREFIX, or train again"
    if not all_:
        path, step, _ = read_newest(prefixes, evaluator.restore, purpose="evaluating", fix=fix)
        return [_row(evaluator, path, step)]
    rows, damaged = [], []
    for prefix in prefixes:  # each one alone: a damaged one is skipped, not fallen back from
        try:
            _, step, _ = read_newest([prefix], evaluator.restore, purpose="--all", fix=fix)
        except DamagedCheckpointError as exc:
            damaged.append(str(exc))
            continue
        rows.append(_row(evaluator, prefix, step))
    if not rows:
        raise DamagedCheckpointError(f"evaluated nothing: {' '.join(damaged)}")
    return rows


def _row(evaluator: Any, prefix: str, step: int) -> dict[str, Any]:
    metrics, examples = evaluator.measure(step)
    return {"step": step, "checkpoint": prefix, "metrics": metrics, "examples": examples}


def register(app: typer.Typer) -> None:
    app.command("evaluate")(evaluate)
