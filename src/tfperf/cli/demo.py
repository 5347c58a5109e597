"""`tfperf demo`: the main job on built-in data. Makes a small dataset of chess positions,
converts it to shards, trains about two minutes with the evaluator in its own process,
and prints what a user wants to know: speed, how input-bound it was, loss, eval metric,
and where the logs and checkpoints are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tfperf.cli.common import JsonOpt, console, print_json, stdout_console, user_errors
from tfperf.util.format import shell_command

# The demo's run file: the chess workload, small enough for 2 CPU cores.
DEMO_RUN: dict[str, Any] = {
    "workload": "chess",
    "data": {"examples": 200_000, "eval_examples": 10_000},
    "pipeline": {"batch_size": 512, "shuffle_buffer": 10_000},
    "train": {
        "max_time": 120,
        "log_every": 20,
        "precision": "float32",
        "checkpoint": {"every_seconds": 20, "every_steps": None, "keep": 5},
    },
    "eval": {"metric": "loss", "mode": "min"},
}


def demo_config(out: Path, max_steps: int | None, seconds: float, examples: int) -> Any:
    from tfperf.config import config_from_dict

    data = json.loads(json.dumps(DEMO_RUN))
    data["data"]["dir"] = str(out / "data")
    data["data"]["examples"] = examples
    data["train"]["out_dir"] = str(out / "run")
    data["train"]["max_time"] = seconds
    if max_steps:
        data["train"]["max_steps"] = max_steps
    return config_from_dict(data, origin="demo")


def _last_eval(out_dir: Path) -> dict[str, Any] | None:
    path = out_dir / "eval_results.jsonl"
    if not path.exists():
        return None
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    return json.loads(lines[-1]) if lines else None


@user_errors
def demo(
    out: Annotated[Path, typer.Option(help="Where data, checkpoints and logs go.")] = Path(
        "demo_out"
    ),
    seconds: Annotated[float, typer.Option(help="Training time budget in seconds.")] = 120.0,
    max_steps: Annotated[
        int | None,
        typer.Option("--max-steps", help="Stop at this global step (a debug limit)."),
    ] = None,
    examples: Annotated[int, typer.Option(help="Chess positions to generate.")] = 200_000,
    evaluator: Annotated[
        bool, typer.Option(help="Run the separate evaluator process alongside training.")
    ] = True,
    json_out: JsonOpt = False,
) -> None:
    """Make chess data, convert it, train ~2 minutes with a separate evaluator, summarize."""
    from tfperf.config import dump_config
    from tfperf.inputs.datasets import ensure_workload_data

    out = out.resolve()  # the run file lives in `out`: its paths must not be relative to it
    out.mkdir(parents=True, exist_ok=True)
    cfg = demo_config(out, max_steps, seconds, examples)
    runfile = out / "demo.yaml"
    runfile.write_text("# tfperf train " + str(runfile) + "\n" + dump_config(cfg))
    cfg.source = str(runfile.resolve())
    console.print(f"[bold]1/3[/] chess data -> {cfg.data.dir}")
    ensure_workload_data(cfg, progress=not json_out)
    beside = " with the evaluator in its own process" if evaluator else ""
    console.print(f"[bold]2/3[/] training{beside}")
    # The loop (and TensorFlow with it) is imported on first use: `--help` stays fast.
    from tfperf.train.loop import train

    result = train(cfg, evaluator=evaluator, progress=not json_out)
    console.print("[bold]3/3[/] summary")
    run_dir = Path(cfg.resolve(cfg.train.out_dir) or cfg.train.out_dir)
    last = _last_eval(run_dir)
    summary = {
        "examples_per_sec": result.examples_per_sec,
        "examples_per_sec_range": result.examples_per_sec_range,
        "input_bound_fraction": result.input_bound_fraction,
        "input_bound_fraction_range": result.input_bound_fraction_range,
        "examples_per_sec_text": result.examples_per_sec_text,
        "input_bound_fraction_text": result.input_bound_fraction_text,
        "spread_note": result.spread_note,
        "steps": result.steps,
        "final_loss": result.final_loss,
        "eval": last,
        "precision": result.precision,
        "checkpoints": str(result.checkpoint_dir),
        "logs": str(result.log_dir),
        "run_file": str(runfile),
        "tensorboard": shell_command("tensorboard", "--logdir", result.log_dir),
    }
    if json_out:
        print_json(summary)
        return
    table = Table(title="tfperf demo", show_header=False)
    table.caption = result.spread_note
    table.add_row("examples/s", result.examples_per_sec_text)
    table.add_row("input-bound fraction", result.input_bound_fraction_text)
    table.add_row("steps", str(result.steps))
    table.add_row("final train loss", f"{result.final_loss:.4f}")
    if last:
        metrics = {k: v for k, v in last.get("metrics", last).items() if isinstance(v, float)}
        shown = ", ".join(f"{k}={v:.4f}" for k, v in metrics.items())
        table.add_row(f"eval (step {last.get('step', '?')})", shown)
    else:
        table.add_row("eval", "no evaluation finished")
    table.add_row("checkpoints", str(result.checkpoint_dir))
    table.add_row("logs", str(result.log_dir))
    table.add_row("run file", str(runfile))
    report = stdout_console()
    report.print(table)
    tensorboard = shell_command("tensorboard", "--logdir", result.log_dir)
    report.print(f"open TensorBoard: {tensorboard}", markup=False)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
