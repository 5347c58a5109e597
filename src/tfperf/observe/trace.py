"""The TF profiler around chosen training steps (`ProfileHook`), and the Chrome trace-event
JSON (timeline.json, opened by Perfetto or chrome://tracing) made from its .xplane.pb:
through xprof when the `profile` extra is installed, else by reading the XSpace proto
that ships inside TensorFlow. Also each device's peak memory.

It profiles and converts; which steps and where to write are the caller's choice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.errors import UserError
from tfperf.hooks import Hook, RunState
from tfperf.util.format import quoted

XPROF_HINT = (
    "install the profile extra for TensorBoard-grade timelines: pip install 'tfperf[profile]'"
)


class ProfileError(UserError):
    """Profiling asked for something that cannot be done (e.g. steps already passed)."""


def parse_steps(spec: str) -> tuple[int, int]:
    """'20:25' -> (20, 25): global steps `start` through `stop`, both included."""
    start, sep, stop = spec.partition(":")
    try:
        a, b = int(start), int(stop if sep else start)
    except ValueError:
        raise ProfileError(
            f"--steps: expected START:STOP (e.g. 20:25), found {quoted(spec)}"
        ) from None
    if a < 1 or b < a:
        raise ProfileError(f"--steps: expected 1 <= START <= STOP, found {quoted(spec)}")
    return a, b


class ProfileHook(Hook):
    """Runs the TF profiler for global steps start..stop (1-based, inclusive), each call
    inside a `Trace("train", step_num=...)` so that the steps show up as steps.

    The loop must run one step per call (train.steps_per_loop: 1) for exact boundaries;
    with more, the profiled window is widened to whole calls.
    """

    def __init__(self, start: int, stop: int, logdir: str | Path | None = None):
        self.start, self.stop = start, stop
        self.logdir = Path(logdir) if logdir else None
        self.active = False
        self.done = False
        self._trace: Any = None
        self.profiled_steps: list[int] = []

    def on_train_begin(self, run: RunState) -> None:
        if self.logdir is None:
            self.logdir = Path(run.log_dir) if run.log_dir else Path(run.out_dir) / "logs"
        if run.step >= self.stop:
            raise ProfileError(
                f"--steps {self.start}:{self.stop}: the run in {run.out_dir} is already at "
                f"step {run.step}; choose later steps or a fresh --out"
            )

    def on_loop_begin(self, run: RunState, step: int) -> None:
        import tensorflow as tf

        if self.done:
            return
        # `step` is the last finished step: this call runs step + 1 onwards.
        if not self.active and step + 1 >= self.start:
            tf.profiler.experimental.start(str(self.logdir))
            self.active = True
        if self.active:
            self._trace = tf.profiler.experimental.Trace("train", step_num=step + 1, _r=1)
            self._trace.__enter__()

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
            self.profiled_steps.append(step)
        if self.active and step >= self.stop:
            self._stop()

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        if self._trace is not None:
            self._trace.__exit__(None, None, None)
            self._trace = None
        if self.active:
            self._stop()

    def _stop(self) -> None:
        import tensorflow as tf

        tf.profiler.experimental.stop()
        self.active = False
        self.done = True


def latest_xplane(logdir: str | Path) -> Path | None:
    """The newest .xplane.pb under {logdir}/plugins/profile/<run>/."""
    files = sorted(
        Path(logdir).glob("plugins/profile/*/*.xplane.pb"), key=lambda p: p.stat().st_mtime
    )
    return files[-1] if files else None


def xprof_available() -> bool:
    try:
        from xprof.convert import raw_to_tool_data  # noqa: F401
    except ImportError:
        return False
    return True


def xplane_to_trace_json(xplane: str | Path) -> tuple[dict[str, Any], str]:
    """(Chrome trace-event dict, converter used: 'xprof' or 'xplane_pb2')."""
    if xprof_available():
        from xprof.convert import raw_to_tool_data

        data, _ = raw_to_tool_data.xspace_to_tool_data([str(xplane)], "trace_viewer", {})
        if data:
            return json.loads(data), "xprof"
    return xspace_to_trace_events(Path(xplane).read_bytes()), "xplane_pb2"


def xspace_to_trace_events(raw: bytes) -> dict[str, Any]:
    """Trace events straight from the XSpace proto: one complete ('X') event per XEvent,
    pid = plane, tid = line, ts and dur in microseconds, stats as args."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    space.ParseFromString(raw)
    events: list[dict[str, Any]] = []
    for pid, plane in enumerate(space.planes, 1):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": plane.name}})
        for tid, line in enumerate(plane.lines, 1):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": tid,
                    "args": {"name": line.display_name or line.name},
                }
            )
            base_ps = line.timestamp_ns * 1000
            for ev in line.events:
                meta = plane.event_metadata[ev.metadata_id]
                args = {
                    plane.stat_metadata[s.metadata_id].name: _stat_value(plane, s) for s in ev.stats
                }
                name = meta.display_name or meta.name
                if "step_num" in args:
                    name = f"{name} {args['step_num']}"  # as TensorBoard's trace viewer names steps
                events.append(
                    {
                        "ph": "X",
                        "name": name,
                        "pid": pid,
                        "tid": tid,
                        "ts": (base_ps + ev.offset_ps) / 1e6,
                        "dur": ev.duration_ps / 1e6,
                        "args": args,
                    }
                )
    return {"displayTimeUnit": "ns", "traceEvents": events}


def _stat_value(plane: Any, stat: Any) -> Any:
    kind = stat.WhichOneof("value")
    if kind == "ref_value":
        return plane.stat_metadata[stat.ref_value].name
    if kind == "bytes_value":
        return f"<{len(stat.bytes_value)} bytes>"
    return getattr(stat, kind) if kind else None


@dataclass
class ProfileResult:
    xplane: Path
    timeline: Path
    converter: str
    events: int
    peak_memory: dict[str, Any] = field(default_factory=dict)
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "xplane": str(self.xplane),
            "timeline": str(self.timeline),
            "converter": self.converter,
            "events": self.events,
            "peak_memory": self.peak_memory,
            "note": self.note,
        }


def write_timeline(logdir: str | Path, out: str | Path) -> ProfileResult:
    """Converts the newest .xplane.pb under `logdir` into `out` (timeline.json)."""
    from tfperf.observe.system import peak_memory

    xplane = latest_xplane(logdir)
    if xplane is None:
        raise ProfileError(f"{logdir}: no .xplane.pb under plugins/profile/ (did the steps run?)")
    trace, converter = xplane_to_trace_json(xplane)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(trace))
    note = None if converter == "xprof" else f"timeline from the raw XSpace proto; {XPROF_HINT}"
    return ProfileResult(
        xplane, out, converter, len(trace.get("traceEvents", [])), peak_memory(), note
    )
