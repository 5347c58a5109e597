"""`InputMonitor`: a Keras callback that shows, inside an existing `model.fit` call, whether
the input keeps up. Per logged step it writes the input wait (ms and fraction of the step),
examples/s, the step time and tf.data's own per-stage model under the TensorBoard tags
`tfperf train` writes (input/wait_ms, input/wait_fraction, step/examples_per_sec,
step/time_ms, input/buffered, input/stage_us/*); at the end of `fit` one line: the
input-bound fraction, the verdict and what to run next.

The callback wraps `model.train_function` (Keras makes it before `on_train_begin`) to time
each call and reach the iterator `fit` made; it implements no per-batch hook, so Keras keeps
dispatching batch callbacks asynchronously. On the JAX (or PyTorch) backend `fit` iterates
the dataset in Python: a step's time there runs from the end of one call to the end of the
next, the tf.data iterator is reached through fit's frame (fit_iterator.py), and on JAX,
which returns before the step has run, the wait counts only what the device sat idle for
(pulls.py). The wait itself comes from a dataset wrapped by
`monitor(ds)` (keras/meter.py): without it only step time and tf.data's stage model are logged.
"""

from __future__ import annotations

import math
import sys
import time
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import keras
import tensorflow as tf

from tfperf.keras.fit_iterator import fit_iterator
from tfperf.keras.meter import InputMeter, MeterReading, monitor, recent_meters
from tfperf.keras.pulls import TimedPulls, first_array
from tfperf.observe.feed import (
    MODERATELY,
    PipelineSnapshot,
    merge_snapshots,
    pipeline_snapshot,
    verdict_for,
    window_span,
)
from tfperf.observe.summaries import make_writer, write_scalars
from tfperf.util.format import percent_figure, plural, rate_figure

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
    # Each logged window's (wall s, wait s, examples): the spread of the two rates.
    windows: list[tuple[float, float, float]] = field(default_factory=list)

    def _span(self, of: int) -> tuple[float, float] | None:
        """The least and most of a window's sum `of` per wall second (None below two)."""
        span = window_span(self.windows, of)
        if span is None or of != 1:
            return span
        return min(1.0, span[0]), min(1.0, span[1])  # a fraction, as input_bound_fraction

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
        share = (
            "input wait unknown"
            if frac is None
            else f"input-bound fraction {percent_figure(frac, self._span(1))}"
        )
        rate = self.examples_per_sec
        speed = f", {rate_figure(rate, self._span(2))} examples/s" if rate is not None else ""
        over = plural(self.steps, "step")
        # The brackets: the least and most of the logged windows, when two were logged.
        windows = f" in {len(self.windows)} logged windows" if self._span(1) else ""
        return f"tfperf: {share} ({self.verdict}{speed} over {over}{windows}); {self.advice()}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["windows"]  # their spread, not each window
        d.update(
            input_bound_fraction=self.input_bound_fraction,
            input_bound_fraction_range=self._span(1) if self.wait_s is not None else None,
            verdict=self.verdict,
            examples_per_sec=self.examples_per_sec,
            examples_per_sec_range=self._span(2) if self.examples is not None else None,
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
        # On other backends fit iterates the dataset in Python and feeds numpy batches.
        self._in_python = keras.backend.backend() != "tensorflow"
        self._mark = 0.0
        self._tf_iterator: Any = None  # a weak reference, on those backends
        self._lookups = 0
        # JAX dispatches a call's step and returns: its wait is timed at the pulls (pulls.py).
        self._pulls = keras.backend.backend() == "jax"
        self._previous: Any = None

        def timed_train_function(*args: Any) -> Any:
            t0 = time.perf_counter()
            pulls = None
            if self._pulls and len(args) == 2:
                pulls = TimedPulls(args[1], self._previous)
                args = (args[0], pulls)
            out = original(*args)
            t1 = time.perf_counter()
            if self._in_python:
                logs = out[0] if isinstance(out, tuple) else out
                if pulls is not None:
                    self._previous = first_array(logs)
                    if self._calls:  # the compiling first call is no sample
                        self._window.idle_s = (self._window.idle_s or 0.0) + pulls.idle
                # From the end of the last call: the batches' pull, callbacks and this call.
                wall, self._mark = (t1 - self._mark if self._mark else t1 - t0), t1
                self._find_tf_iterator(sys._getframe(1))
                self._after_call(None, wall, logs)
            else:
                self._after_call(args[0], t1 - t0, out)
            return out

        self.model.train_function = timed_train_function

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self._in_python and epoch > 0:
            # A new epoch's fit makes a new iterator: found again at its first calls.
            self._tf_iterator, self._lookups = None, 0
            self._mark = 0.0  # the last epoch's end and validation left out

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        if self._original is not None:
            self.model.train_function = self._original
            self._original = None
        if self._window.steps:
            self._log(self._window.last_out)
        self._iterator = None  # fit's iterator (and its buffers) must not outlive fit
        self._tf_iterator = None
        self._previous = None
        if self._writer is not None:
            self._writer.flush()
        if self.verbose:
            print(self.summary.line(), file=self.stream or sys.stdout)

    # ---- per call ----------------------------------------------------------------------
    def _after_call(self, iterator: Any, wall: float, out: Any) -> None:
        # Per call only counters: the meter is read at logged points (each read is a host
        # round trip, ~1% of a 5 ms step if done every call).
        self._iterator = iterator if not self._in_python else self._python_fed_iterator()
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

    def _find_tf_iterator(self, frame: Any) -> None:
        """Looks for the tf.data iterator fit pulls from in Python, at an epoch's first few
        calls (the first may come before fit's generator has started)."""
        if self._tf_iterator is None and self._lookups < 3:
            self._lookups += 1
            found = fit_iterator(frame)
            if found is not None:
                self._tf_iterator = weakref.ref(found)

    def _python_fed_iterator(self) -> Any:
        """The tf.data iterator fit pulls from in Python (None when it is gone)."""
        return self._tf_iterator() if self._tf_iterator is not None else None

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
        plain = self._in_python or isinstance(self._iterator, tf.data.Iterator)
        if plain and delta.batches > 0:
            self._step += int(delta.batches) - self._window.steps
            self._window.steps = int(delta.batches)

    def _log(self, out: Any) -> None:
        self._read_window()
        w, s = self._window, self.summary
        s.steps += w.steps
        s.wall_s += w.wall_s
        values: dict[str, float] = {"step/time_ms": 1e3 * w.wall_s / w.steps}
        if w.reading is not None:
            wait = w.reading.wait_s
            if w.idle_s is not None:
                # Dispatched asynchronously: a pull while the step still ran cost nothing.
                wait = min(wait, w.idle_s)
            s.wait_s = (s.wait_s or 0.0) + wait
            s.examples = (s.examples or 0.0) + w.reading.examples
            values["input/wait_ms"] = 1e3 * wait / w.steps
            values["input/wait_fraction"] = min(1.0, wait / w.wall_s)
            values["step/examples_per_sec"] = w.reading.examples / w.wall_s
            s.windows.append((w.wall_s, wait, float(w.reading.examples)))
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
    # On JAX: the seconds the device sat idle while batches were pulled (pulls.py).
    idle_s: float | None = None

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
