"""`tfperf train`: parses options, runs tfperf.train.loop.train and prints the end-of-run
table (or JSON). The loop, checkpoints and summaries live in tfperf/train and
tfperf/observe; this module only wires the command line to them and prints the result."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tfperf.cli.common import (
    JsonOpt,
    RunFileArg,
    SetOpt,
    command,
    load_run,
    print_error,
    print_json,
    stdout_console,
)
from tfperf.train.strategy import bind_own_server, check_shared_job
from tfperf.util.format import plural, shell_command

if TYPE_CHECKING:
    from tfperf.train.loop import TrainResult

HELP = """Train the run file's model with tfperf's loop: one compiled function runs
train.steps_per_loop steps per call (auto: ~0.3 s per call, from the measured step time);
the function must never retrace (a changed input shape or dtype is an error that names it).

Resumes automatically from the latest checkpoint in {train.out_dir}/checkpoints (model,
optimizer, step and, with train.checkpoint_input, the input iterator: an interrupted epoch
continues exactly where it stopped; one_device and mirrored only: TensorFlow cannot
save it under multi_worker or parameter_server, nor a pipeline that calls Python
(py_function, numpy_function, from_generator) or stateful random ops: that one trains
without it, with a warning). SIGTERM/SIGINT let the running call finish, then save a
checkpoint before exiting (saying how large the input iterator in it is: its shuffle
buffer can take seconds to save). A run that fails before it starts removes the folders it
made for train.out_dir. Stops at train.max_steps (a global step), train.epochs or
train.max_time (seconds); a NaN/Inf loss stops training with an error naming the steps.
The end-of-run summary goes to stdout; the progress bar (examples/s: the mean over the
timed calls, as the summary's) to stderr.

One `tfperf train` at a time per train.out_dir: a second one is refused, naming the first.
Writes {out_dir}/logs/train for TensorBoard: loss, each metric under its own name (the
evaluator writes the same tags to logs/eval: one chart each), learning_rate,
step/examples_per_sec, step/time_ms, input/wait_ms, input/wait_fraction, input/buffered,
input/stage_us/*, input/service_lost (examples a distributed_epoch epoch lost on the tf.data
service), weight histograms, and the train function's graph. When training ends
normally, {out_dir}/checkpoints/FINAL ({"step": N, "checkpoint": path}) marks the end.

train.jit_compile: auto | true | false (auto, as Keras' compile: XLA on with an accelerator
when every layer supports it, off on CPU-only hosts and under mirrored or multi-worker; a
step XLA refuses trains without it, saying why). train.precision: auto | float32 |
mixed_float16 | mixed_bfloat16 (auto times each policy
the hardware runs and keeps the fastest with a finite loss). train.strategy: auto |
one_device | mirrored | multi_worker (TF_CONFIG) | parameter_server (train.cluster, with
`tfperf cluster-server` tasks).

--json prints: steps, start_step, examples_per_sec, input_bound_fraction (input wait /
wall time), their _range (the slowest and fastest stretch of 1 s or more of timed calls,
null below two) and _text (as the table prints them), spread_note, wait_ms_mean,
final_loss, metrics, precision, precision_detail, jit_compile (the train step compiled
with XLA) and jit_compile_reason, strategy,
stopped_because (max_steps | epochs | max_time | signal), signal (SIGTERM | SIGINT:
the command then exits 143 | 130 after saving the checkpoint), steps_per_loop, global_batch,
restored_from, checkpoint, out_dir, checkpoint_dir, log_dir, buffered_mean, pipeline
(the prefetch buffer and each stage's us/element from tf.data's model), evaluator (with
--evaluator: exit_code, failed, error, last result, summary; a failed evaluator makes
the command exit 1 after training), service (with pipeline.service on: address, mode,
pauses [{step, seconds}] of the input, lost: examples a distributed_epoch epoch lost to a
worker that died mid-epoch (the service delivers at most once; parallel_epochs loses none:
each worker serves every example), epochs [{epoch, received, lost}], note).

With pipeline.service a resume restores the model, optimizer and step, not the input
position: TensorFlow cannot save a tf.data service iterator, so a resumed run starts a new
pass over the data (a trainer rejoining a shared pipeline.service.job_name that is still
served reads on from where that job is).
"""


def register(app: typer.Typer) -> None:
    @command(
        app,
        "train",
        HELP,
        "Train with tfperf's loop (resumes, logs, checkpoints, measures input wait).",
    )
    def train_cmd(
        runfile: RunFileArg = None,
        set_: SetOpt = None,
        max_steps: Annotated[
            int | None,
            typer.Option(
                "--max-steps",
                min=1,
                help="Stop at this global step (a debug limit; overrides train.max_steps).",
            ),
        ] = None,
        evaluator: Annotated[
            bool,
            typer.Option(
                "--evaluator",
                help="Also start the watching evaluator (as `tfperf evaluate RUNFILE --watch`, "
                "same --set values) as a separate CPU-only process; it evaluates "
                "each new checkpoint and exits after the final one.",
            ),
        ] = False,
        print_tensors: Annotated[
            str | None,
            typer.Option(
                "--print-tensors",
                metavar="NAME,...",
                help="Print these tensors "
                "from inside the graph for the first train.print_steps steps: "
                "layer names (their outputs), 'loss', 'labels'.",
            ),
        ] = None,
        progress: Annotated[
            bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")
        ] = True,
        json_out: JsonOpt = False,
    ) -> None:
        overrides = list(set_ or [])
        if print_tensors:
            names = [n.strip() for n in print_tensors.split(",") if n.strip()]
            overrides.append(f"train.print_tensors=[{', '.join(repr(n) for n in names)}]")
        cfg = load_run(runfile, overrides)
        # Before TensorFlow: a run the cluster would refuse stops here, and a cluster task's
        # server listens on its named host only.
        check_shared_job(cfg)
        bind_own_server(cfg)
        from tfperf.inputs.datasets import ensure_workload_data

        if cfg.workload and not cfg.data.pipeline:
            ensure_workload_data(cfg, progress=progress)
        # The loop (and TensorFlow with it) is imported on first use: `--help` stays fast.
        from tfperf.train.loop import train

        result = train(
            cfg,
            max_steps=max_steps,
            evaluator=evaluator,
            progress=progress and not json_out,
            overrides=list(set_ or []),
        )
        if json_out:
            print_json(result.to_dict())
        else:
            print_summary(result, stdout_console())  # a report: stdout, as every command's
        if result.evaluator is not None and result.evaluator["failed"]:
            # Training's own work is saved; the run still fails, so scripts notice.
            print_error(
                f"--evaluator: the evaluator failed (exit status "
                f"{result.evaluator['exit_code']}): {result.evaluator['error']}; see "
                f"{result.evaluator['log']}; training finished and its checkpoints are kept "
                "(evaluate them: "
                f"`{shell_command('tfperf', 'evaluate', runfile, '--watch', '--all')}`)"
            )
            raise typer.Exit(1)
        if result.stopped_because == "signal":
            # 128 + the signal's number (130 SIGINT, 143 SIGTERM), as a shell reports it: the
            # checkpoint is saved, but the run is not finished.
            raise typer.Exit(128 + signal.Signals[result.signal or "SIGINT"].value)


def print_summary(result: TrainResult, console: Any) -> None:
    """The end-of-run table (throughput, input wait, precision, strategy, stages), then
    where the checkpoint and logs are, each path whole on its own line."""
    t = Table(title=f"training ({result.stopped_because})", show_header=False)
    t.add_column("what")
    t.add_column("value", overflow="fold")  # a word wider than the cell folds, never cut
    t.add_row(
        "steps",
        f"{result.start_step} -> {result.steps} (global batch {result.global_batch}, "
        f"{plural(result.steps_per_loop, 'step')} per call)",
    )
    t.add_row("final loss", f"{result.final_loss:.6g}")
    for k, v in result.metrics.items():
        t.add_row(k, f"{v:.6g}")
    if result.examples_per_sec > 0:
        t.add_row("examples/s", result.examples_per_sec_text)
        wait = f"{result.wait_ms_mean:.2f} ms/step, {result.input_bound_fraction_text}"
        t.add_row("input wait", f"{wait} of the time (input-bound fraction)")
        t.caption = result.spread_note
    else:  # only the compiling first call ran: nothing timed, not "0% input-bound"
        t.add_row("examples/s", "not measured (only the compiling first call ran)")
        t.add_row("input wait", "not measured")
    if result.buffered_mean is not None:
        t.add_row("prefetch buffer", f"{result.buffered_mean:.1f} batches on average")
    t.add_row("precision", (result.precision_detail or result.precision).removeprefix("precision "))
    t.add_row("XLA", f"{'on' if result.jit_compile else 'off'} ({result.jit_compile_reason})")
    t.add_row("strategy", result.strategy)
    if result.evaluator is not None:
        t.add_row("evaluator", escape(result.evaluator["summary"]))
    if result.service_summary:
        t.add_row("tf.data service", escape(result.service_summary))
    console.print(t)
    # Below the table, not in a cell: a cell would wrap a long path.
    checkpoint = result.checkpoint or result.checkpoint_dir
    console.print(f"checkpoint: {escape(str(checkpoint))}", highlight=False)
    console.print(
        f"TensorBoard: {escape(shell_command('tensorboard', '--logdir', result.log_dir))}",
        highlight=False,
    )
    if result.pipeline is not None and result.pipeline.stages:
        s = Table(title="input pipeline (tf.data's model, output first)")
        for col in ("stage", "us/element", "elements", "parallelism", "buffered"):
            s.add_column(col)
        for st in result.pipeline.stages:
            par = "" if st.parallelism is None else f"{st.parallelism:g}"
            s.add_row(st.name, f"{st.us_per_element:.1f}", str(st.elements), par, str(st.buffered))
        console.print(s)
