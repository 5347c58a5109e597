"""`tfperf profile`: a real training run with the TF profiler on for chosen steps, then
timeline.json (Chrome trace events) beside the .xplane.pb that TensorBoard reads. This
module parses options and prints; observe/trace.py profiles and converts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tfperf.cli.common import (
    JsonOpt,
    RunFileArg,
    SetOpt,
    command,
    load_run,
    print_json,
    stdout_console,
    tensorflow_startup_filtered,
)
from tfperf.train.strategy import bind_own_server
from tfperf.util.format import shell_command

HELP = """Profile steps START..STOP (global steps, both included) of a real training run of
the run file, one step per compiled call so that each step is its own trace span.

Writes, under --out (default {train.out_dir}/profile; checkpoints and logs go there too):
  logs/plugins/profile/<run>/<host>.xplane.pb: for TensorBoard's profile plugin
    (tensorboard --logdir OUT/logs);
  timeline.json: Chrome trace-event JSON (open in https://ui.perfetto.dev or
    chrome://tracing), per-op time on each device thread, each step a 'train' span with
    its step_num.

Converted with xprof when the profile extra is installed (pip install
'tfperf[profile]'), else read straight from the XSpace proto (coarser, same events).
Prints each device's peak memory where TensorFlow tracks it (not on CPU).

--json prints: xplane, timeline, converter (xprof | xplane_pb2), events, peak_memory,
steps [START, STOP], out_dir, note.
"""


def register(app: typer.Typer) -> None:
    @command(
        app,
        "profile",
        HELP,
        "Profile real training steps into timeline.json and TensorBoard's profile.",
    )
    def profile(
        runfile: RunFileArg = None,
        set_: SetOpt = None,
        json_out: JsonOpt = False,
        steps: Annotated[
            str,
            typer.Option(
                "--steps",
                help="Global steps to profile, START:STOP (both "
                "included, 1-based); training stops after global step STOP.",
            ),
        ] = "20:25",
        out: Annotated[
            str | None,
            typer.Option(
                "--out",
                help="Output folder (default: {train.out_dir}/profile). "
                "Use a fresh one: a run resumed past START has nothing to profile.",
            ),
        ] = None,
    ) -> None:
        from tfperf.observe.trace import ProfileHook, parse_steps, write_timeline

        start, stop = parse_steps(steps)
        cfg = load_run(runfile, set_)
        # Before TensorFlow: a cluster task's server listens on its named host only.
        bind_own_server(cfg)
        out_dir = Path(out) if out else Path(cfg.resolve(cfg.train.out_dir) or ".") / "profile"
        cfg.train.out_dir = str(out_dir)
        # One step per call: the profiled window and the step spans are exact.
        cfg.train.steps_per_loop = 1
        from tfperf.train.loop import train

        hook = ProfileHook(start, stop)
        result = train(cfg, hooks=[hook], max_steps=stop, progress=not json_out)
        with tensorflow_startup_filtered():  # xprof's own C++ logging starts up here
            prof = write_timeline(result.log_dir, out_dir / "timeline.json")
        data = {**prof.to_dict(), "steps": [start, stop], "out_dir": str(out_dir)}
        if json_out:
            print_json(data)
            return
        console = stdout_console()
        lines = [
            f"profiled steps {start}-{stop} of {cfg.source or 'the run'}",
            f"  TensorBoard profile: {prof.xplane}  "
            f"({shell_command('tensorboard', '--logdir', result.log_dir)})",
            f"  timeline.json:       {prof.timeline}  ({prof.events} events, "
            f"{prof.converter}; open in https://ui.perfetto.dev)",
        ]
        for dev, peak in prof.peak_memory.items():
            shown = f"{peak / 2**20:,.1f} MiB" if isinstance(peak, int) else peak
            lines.append(f"  peak memory {dev}: {shown}")
        if prof.note:
            lines.append(f"note: {prof.note}")
        for line in lines:
            console.print(line, markup=False, highlight=False)
