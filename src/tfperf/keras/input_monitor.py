"""`InputMonitor`: a Keras callback that shows, inside an existing `model.fit` call, whether
the input keeps up. Per logged step it writes the input wait (ms and fraction of the step),
examples/s, the step time and tf.data's own per-stage model under the TensorBoard tags
`tfperf train` writes (input/wait_ms, input/wait_fraction, step/examples_per_sec,
step/time_ms, input/buffered, input/stage_us/*); at the end of `fit` one line: the
input-bound fraction, the verdict and what to run next.

The callback wraps `model.train_function` (Keras makes it before `on_train_begin`) to time
each call and reach the iterator `fit` made; it implements no per-batch hook, so Keras keeps
dispatching batch callbacks asynchronously. The wait itself comes from a dataset wrapped by
`monitor(ds)` (keras/meter.py): without it only step time and tf.data's stage model are logged.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import keras
import tensorflow as tf

from tfperf.keras.meter import InputMeter, MeterReading, monitor, recent_meters
from tfperf.observe.feed import (
    MODERATELY,
    PipelineSnapshot,
    merge_snapshots,
    pipeline_snapshot,
    verdict_for,
)
from tfperf.observe.summaries import make_writer, write_scalars
from tfperf.util.format import plural

if TYPE_CHECKING:
    import tensorflow as tf

# Calls between two reads of tf.data's model (~0.3 ms each) besides the logged points: a
# short epoch's iterator may be exhausted, its model gone, by the next logged point.
SNAPSHOT_EVERY = 16


@dataclass
class FitInputSummary:
    """What the monitor saw over a whole `fit` (the compiling first call left out)."""

    steps: int = 0
    wall_s: float = 0.0
    wait_s: float | None = None  # None: the dataset was not wrapped with monitor()
    examples: float | None = None
    stage_us: dict[str, float] = field(default_factory=dict)

    @property
    def input_bound_fraction(self) -> float | None:
        if self.wait_s is None or self.wall_s <= 0:
            return None
        return min(1.0, self.wait_s / self.wall_s)

    @property
    def verdict(self) -> str:
        frac = self.input_bound_fraction
        return "unknown (the dataset was not monitored)" if frac is None else verdict_for(frac)

    @property
    def examples_per_sec(self) -> float | None:
        return self.examples / self.wall_s if self.examples is not None and self.wall_s else None

    def advice(self) -> str:
        """The next thing to run, from the verdict."""
        frac = self.input_bound_fraction
        if frac is None:
            return (
                "wrap the training dataset to measure input wait: "
                "model.fit(tfperf.keras.monitor(ds), callbacks=[InputMonitor(...)])"
            )
        if frac >= MODERATELY:
            return (
                "the input sets the pace: ds, report = tfperf.optimize(ds, model) and fit on "
                "the returned ds (or `tfperf doctor RUN.yaml --fix` with a run file)"
            )
        return (
            "the model sets the pace, not the input: speed up the step "
            "(mixed precision, XLA via compile(jit_compile=True), a larger batch)"
        )

    def line(self) -> str:
        if not self.steps:
            return (
                "tfperf: no step measured after the compiling first call; fit for more "
                "steps to see the input wait"
            )
        frac = self.input_bound_fraction
        share = "input wait unknown" if frac is None else f"input-bound fraction {frac:.1%}"
        rate = self.examples_per_sec
        speed = f", {rate:,.0f} examples/s" if rate is not None else ""
        over = plural(self.steps, "step")
        return f"tfperf: {share} ({self.verdict}{speed} over {over}); {self.advice()}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            input_bound_fraction=self.input_bound_fraction,
            verdict=self.verdict,
            examples_per_sec=self.examples_per_sec,
        )
        return d


def monitored_root(proto: Any) -> int | None:
    """The user's pipeline under monitor()'s record map: the second input of the first zip
    down the output's chain (a strategy's rebatch and prefetch sit above it)."""
    nodes, seen = proto.nodes, set()
    node = nodes.get(proto.output)
    while node is not None and node.id not in seen:
        seen.add(node.id)
        if node.name.startswith("Zip") and len(node.inputs) == 2:
            return int(node.inputs[1])
        node = nodes.get(node.inputs[0]) if node.inputs else None
    return None


class InputMonitor(keras.callbacks.Callback):
    """Input wait, examples/s and tf.data's stage model for `model.fit`.

        mon = tfperf.keras.InputMonitor(log_dir="logs")
        model.fit(tfperf.keras.monitor(train_ds), callbacks=[mon], ...)
        mon.summary.input_bound_fraction

    `log_dir`: TensorBoard scalars go to {log_dir}/train (where Keras' TensorBoard callback
    writes its own); None writes nothing. `log_every`: steps between logged points.
    `verbose`: 0 prints nothing at the end of fit.
    """

    def __init__(
        self,
        log_dir: str | Path | None = None,
        log_every: int = 50,
        verbose: int = 1,
        stream: TextIO | None = None,
    ):
        super().__init__()
        if not isinstance(log_every, int) or isinstance(log_every, bool) or log_every < 1:
            raise ValueError(f"InputMonitor: log_every must be an int >= 1, got {log_every!r}")
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.log_every, self.verbose, self.stream = log_every, verbose, stream
        self.summary = FitInputSummary()
        self._own: InputMeter | None = None
        self._writer: Any = None
        self._original: Any = None

    def monitor(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        """`tfperf.keras.monitor(ds)` tied to this callback (no guessing which dataset fit
        trains on when several are monitored)."""
        self._own = InputMeter()
        return monitor(ds, self._own)

    # ---- Keras hooks -------------------------------------------------------------------
    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self.summary = FitInputSummary()
        self._calls, self._step = 0, 0
        self._iterator: Any = None
        self._meter: InputMeter | None = self._own
        self._candidates = {
            id(m): (m, m.read()) for m in ([self._own] if self._own else recent_meters())
        }
        self._window = _Window()
        self._last: MeterReading | None = None
        self._snapshot: PipelineSnapshot | None = None
        if self.log_dir is not None and self._writer is None:
            self._writer = make_writer(self.log_dir / "train")
        self._steps_per_call = int(getattr(self.model, "steps_per_execution", 1) or 1)
        self._original = self.model.train_function
        original = self._original

        def timed_train_function(iterator: Any) -> Any:
            t0 = time.perf_counter()
            out = original(iterator)
            self._after_call(iterator, time.perf_counter() - t0, out)
            return out

        self.model.train_function = timed_train_function

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._original is not None:
            self.model.train_function = self._original
            self._original = None
        if self._window.steps:
            self._log(self._window.last_out)
        self._iterator = None  # fit's iterator (and its buffers) must not outlive fit
        if self._writer is not None:
            self._writer.flush()
        if self.verbose:
            print(self.summary.line(), file=self.stream or sys.stdout)

    # ---- per call ----------------------------------------------------------------------
    def _after_call(self, iterator: Any, wall: float, out: Any) -> None:
        # Per call only counters: the meter is read at logged points (each read is a host
        # round trip, ~1% of a 5 ms step if done every call).
        self._iterator = iterator
        self._calls += 1
        steps = self._steps_per_call
        self._step += steps
        if self._calls == 1:  # the call that traced and compiled: a baseline, not a sample
            self._meter = self._meter or self._find_meter()
            self._last = self._meter.read() if self._meter else None
            return
        self._window.add(wall, steps, out)
        if self._window.steps >= self.log_every:
            self._log(out)
        elif self._calls % SNAPSHOT_EVERY == 0:
            self._take_snapshot()

    def _take_snapshot(self) -> None:
        """tf.data's model now, kept while the iterator lives (an exhausted one has none)."""
        if self._iterator is None:
            return
        start = monitored_root if self._meter is not None else None
        snap = pipeline_snapshot(self._iterator, start)
        if snap is not None:
            self._snapshot = merge_snapshots(self._snapshot, snap)

    def _find_meter(self) -> InputMeter | None:
        """The monitored dataset fit trains on: the one whose batch count moved."""
        moved = [(m.read().batches - before.batches, m) for m, before in self._candidates.values()]
        moved = [(n, m) for n, m in moved if n > 0]
        return max(moved, key=lambda p: p[0])[1] if moved else None

    def _read_window(self) -> None:
        """The meter's sums over the window; a plain iterator's batches are the steps run
        (a short last call included), a distributed one prefetches ahead of the steps, so
        there the steps stay calls x steps_per_execution."""
        if self._meter is None or self._last is None:
            return
        reading = self._meter.read()
        delta, self._last = reading - self._last, reading
        self._window.reading = delta
        if isinstance(self._iterator, tf.data.Iterator) and delta.batches > 0:
            self._step += int(delta.batches) - self._window.steps
            self._window.steps = int(delta.batches)

    def _log(self, out: Any) -> None:
        self._read_window()
        w, s = self._window, self.summary
        s.steps += w.steps
        s.wall_s += w.wall_s
        values: dict[str, float] = {"step/time_ms": 1e3 * w.wall_s / w.steps}
        if w.reading is not None:
            s.wait_s = (s.wait_s or 0.0) + w.reading.wait_s
            s.examples = (s.examples or 0.0) + w.reading.examples
            values["input/wait_ms"] = 1e3 * w.reading.wait_s / w.steps
            values["input/wait_fraction"] = min(1.0, w.reading.wait_s / w.wall_s)
            values["step/examples_per_sec"] = w.reading.examples / w.wall_s
        self._take_snapshot()
        snap = self._snapshot
        if snap is not None:
            values["input/buffered"] = float(snap.buffered)
            for i, stage in enumerate(snap.stages):
                if stage.elements:  # a stage that produced nothing yet has no time to show
                    key = f"input/stage_us/{i:02d}_{stage.name}"
                    values[key] = s.stage_us[key] = stage.us_per_element
        if self._writer is not None:
            values.update(_scalar_logs(out))
            write_scalars(self._writer, self._step, values)
        self._window = _Window()


@dataclass
class _Window:
    """Calls since the last logged point."""

    steps: int = 0
    wall_s: float = 0.0
    reading: MeterReading | None = None
    last_out: Any = None

    def add(self, wall: float, steps: int, out: Any) -> None:
        self.steps += steps
        self.wall_s += wall
        self.last_out = out


def _scalar_logs(out: Any) -> dict[str, float]:
    """Loss and metrics of fit's last call (one host sync per logged point)."""
    if not isinstance(out, dict):
        return {}
    values = {}
    for key, value in out.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            values[key] = number
    return values


__all__ = ["FitInputSummary", "InputMonitor"]
