"""The one way tfperf times things. A *probe* times one repeat of one variant and returns a
`Run`: `pipeline_probe` pulls batches from a dataset inside a compiled loop (as a train step
does, no Python per batch), `training_probe` runs a real train step fed by a dataset, and
`cached_batch` turns a dataset into the compute limit's input (one batch from memory).
`side_by_side` runs several probes interleaved (A B A B ...) so that a slow moment of the
machine hits all of them; `measure.compare` then judges the pairs.

Every repeat starts a fresh iterator and warms it up untimed (buffers fill, functions trace,
kernel caches warm), and drops it afterwards so that its background threads never run
beside the next variant's timing.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.errors import UserError
from tfperf.measure.runs import Measurement, Run

if TYPE_CHECKING:
    import tensorflow as tf

# A step runner: runs `n` train steps pulling from `iterator`; returns the seconds it
# waited for input (0.0 when it does not know), or that and the examples its batches held
# (a last partial batch, variable batches: without the count each step counts a full
# batch). Reading its result must wait for the steps.
StepRunner = Callable[[Any, int], "float | tuple[float, int]"]
OnRun = Callable[[str, int], None]  # (variant name, repeat index) after each timed repeat


def leading_dim(element: Any) -> int:
    """Examples in one element: the first tensor's leading dimension (1 for scalars); a
    ragged tensor's rows, a sparse one's first dense dimension."""
    import tensorflow as tf

    # Not expand_composites: a ragged tensor's first leaf would be its flat values.
    flat = tf.nest.flatten(element)
    if not flat:
        return 1
    first = flat[0]
    if isinstance(first, tf.SparseTensor):
        return int(first.dense_shape[0]) if first.shape.rank else 1
    if isinstance(first, tf.RaggedTensor):
        return int(first.nrows())
    shape = first.shape
    if not shape.rank:
        return 1
    return int(shape[0]) if shape[0] is not None else int(tf.shape(first)[0])


def batch_rows(first: Any) -> Any:
    """Rows of an element's first component inside a compiled function (an int64 tensor, or
    1 for a scalar): a ragged tensor's nrows, a sparse one's dense_shape[0]."""
    import tensorflow as tf

    rank = first.shape.rank
    if rank == 0:
        return 1
    if isinstance(first, tf.RaggedTensor):
        return first.nrows(out_type=tf.int64)
    if isinstance(first, tf.SparseTensor):
        return first.dense_shape[0]
    # One of unknown rank (a py_function's output) counts its rows at run time.
    return tf.shape(first, out_type=tf.int64)[0]


def repeat_if_finite(ds: tf.data.Dataset) -> tf.data.Dataset:
    """`ds` repeated when it ends (restarting is part of an epoch's cost); as is otherwise."""
    import tensorflow as tf

    if int(tf.data.experimental.cardinality(ds)) == tf.data.INFINITE_CARDINALITY:
        return ds
    return ds.repeat()


def cached_batch(ds: tf.data.Dataset) -> tf.data.Dataset:
    """The compute limit's input: the first element of `ds` from memory, forever
    (`take(1).cache().repeat()` keeps the element spec, so a step is not re-traced)."""
    return ds.take(1).cache().repeat()


@functools.cache
def _consumer() -> Any:
    """A compiled loop pulling `n` elements inside the graph, returning how many examples
    they held. One function for the process: traced once per element spec, not once per
    probe (a trace costs ~40 ms of CPU, a doctor times dozens of probes)."""
    import tensorflow as tf

    @tf.function
    def consume(it: Any, n: Any) -> Any:
        count = tf.constant(0, tf.int64)
        for _ in tf.range(n):
            # Elements here are batches; not expand_composites: a ragged or sparse first
            # component counts its rows, not its flat values.
            first = tf.nest.flatten(next(it))[0]
            count += tf.cast(batch_rows(first), tf.int64)
        return count

    return consume


@dataclass
class _Timer:
    seconds: float = 0.0
    cpu: float = 0.0

    def __enter__(self) -> _Timer:
        self._t, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.seconds = time.perf_counter() - self._t
        self.cpu = time.process_time() - self._c


class Probe:
    """Times one repeat of one variant when called."""

    def __init__(self, name: str, run_once: Callable[[], Run]):
        self.name, self._run_once = name, run_once

    def __call__(self) -> Run:
        return self._run_once()


def pipeline_probe(
    name: str,
    ds: tf.data.Dataset,
    *,
    batches: int,
    warmup: int,
    min_seconds: float = 0.0,
    chunk: int | None = None,
    time_limit: float | None = None,
) -> Probe:
    """Examples/s of `ds` alone (its elements are batches; a finite one is repeated): each
    repeat pulls `warmup` untimed batches, then at least `batches` (and `min_seconds`)
    timed, in compiled chunks of `chunk` batches (default: all of them at once). With
    `time_limit` (seconds) no chunk starts once the timed part has taken that long (at
    least one chunk runs)."""
    import tensorflow as tf

    ds = repeat_if_finite(ds)
    consume = _consumer()
    chunk = max(1, chunk or batches)

    def run_once() -> Run:
        it = iter(ds)
        try:
            _warm_up(consume, it, warmup, time_limit)  # traces; buffers fill; not timed
            examples = pulled = 0
            # Under a time limit the first chunk is one batch, the next sized to what is left
            # of the limit: one batch of a slow pipeline (video frames) can take seconds.
            step = chunk if time_limit is None else 1
            with _Timer() as t:
                start = time.perf_counter()
                while _more(pulled, batches, time.perf_counter() - start, min_seconds, time_limit):
                    examples += int(consume(it, tf.constant(step)))
                    pulled += step
                    if time_limit is not None:
                        elapsed = time.perf_counter() - start
                        fits = (time_limit - elapsed) / max(1e-9, elapsed / pulled)
                        step = max(1, min(chunk, int(fits)))
        except tf.errors.OutOfRangeError:
            raise UserError(f"{name}: the dataset is empty") from None
        finally:
            del it  # stops its background threads before the next variant runs
        return Run(t.seconds, pulled, examples, t.cpu)

    return Probe(name, run_once)


def _warm_up(consume: Any, it: Any, warmup: int, time_limit: float | None) -> None:
    """`warmup` batches pulled untimed: in one call, or under a time limit one at a time
    until the limit (a second at least) has passed (at least one batch)."""
    import tensorflow as tf

    if time_limit is None:
        consume(it, tf.constant(max(1, warmup)))
        return
    start = time.perf_counter()
    for _ in range(max(1, warmup)):
        consume(it, tf.constant(1))
        # At least a second: a fast pipeline's buffers fill whatever a small limit says.
        if time.perf_counter() - start > max(time_limit, 1.0):
            return


class TooSlow(Exception):
    """A variant whose single step takes longer than a timed repeat may: not measured (it is
    far slower than what it would replace)."""

    def __init__(self, seconds: float, limit: float, traced: bool = False):
        what = "its first step (tracing included)" if traced else "one step"
        super().__init__(f"{what} took {seconds:.1f} s, over the {limit:.1f} s a repeat may take")
        self.seconds = seconds


def training_probe(
    name: str,
    run_steps: StepRunner,
    ds: tf.data.Dataset,
    *,
    steps: int,
    warmup: int,
    examples_per_step: int,
    min_seconds: float = 0.0,
    time_limit: float | None = None,
    give_up: bool = False,
) -> Probe:
    """A real train step fed by `ds`: each repeat runs two untimed calls of `warmup` steps
    (the first may trace and compile, the second warms kernel caches; later repeats reuse
    the trace), then calls of `steps` steps until `min_seconds` have passed (and no new call
    once `time_limit` seconds have)."""
    ds = repeat_if_finite(ds)

    def run_once() -> Run:
        it = iter(ds)
        try:
            per_call = steps
            if time_limit is None:
                run_steps(it, max(1, warmup))
                run_steps(it, max(1, warmup))
            else:
                # Under a time limit a call cannot be cut short: one step traces, one more is
                # timed, and calls are sized to a quarter of the limit (a step of seconds,
                # e.g. an emulated float16 matmul on a CPU, must not blow the budget).
                t0 = time.perf_counter()
                run_steps(it, 1)
                if give_up and time.perf_counter() - t0 > 2 * time_limit + 10:  # traced too
                    raise TooSlow(time.perf_counter() - t0, time_limit, traced=True)
                t0 = time.perf_counter()
                run_steps(it, 1)
                step_s = max(1e-6, time.perf_counter() - t0)
                if give_up and step_s > time_limit:  # a what-if, not a required rate
                    raise TooSlow(step_s, time_limit)
                per_call = max(1, min(steps, int(time_limit / 4 / step_s)))
                run_steps(it, max(1, min(warmup, per_call)))
            wait = 0.0
            done = examples = 0
            with _Timer() as t:
                start = time.perf_counter()
                while _more(done, 1, time.perf_counter() - start, min_seconds, time_limit):
                    got = run_steps(it, per_call)
                    full = per_call * examples_per_step  # when the runner does not count
                    waited, held = got if isinstance(got, tuple) else (got, full)
                    wait += float(waited)
                    examples += held
                    done += per_call
        finally:
            del it
        return Run(t.seconds, done, examples, t.cpu, wait)

    return Probe(name, run_once)


def _more(
    done: int, at_least: int, elapsed: float, min_seconds: float, limit: float | None
) -> bool:
    """Whether a probe times another chunk: until `at_least` steps and `min_seconds`, but
    never past `limit` once something was timed."""
    if done and limit is not None and elapsed >= limit:
        return False
    return done < at_least or elapsed < min_seconds


class _NoRetraceWarning(logging.Filter):
    """Drops TensorFlow's "excessive retracing" warning: the pulling loop is traced once per
    element spec on purpose (each pipeline prefix has its own), and TF counts those as
    retraces."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "retracing" not in record.getMessage()


def side_by_side(
    probes: Iterable[Probe],
    *,
    repeats: int,
    on_run: OnRun | None = None,
    time_limit: float | None = None,
    min_repeats: int = 1,
) -> dict[str, Measurement]:
    """Every probe `repeats` times, round-robin (A B C A B C ...). With `time_limit`
    (seconds), no new round starts once it has passed, after `min_repeats` rounds (at
    least one runs, so every variant has a measurement; with one, comparisons say 'same'
    for want of pairs)."""
    probes = list(probes)
    out = {p.name: Measurement(p.name) for p in probes}
    start = time.monotonic()
    quiet = _NoRetraceWarning()
    tf_logger = logging.getLogger("tensorflow")
    tf_logger.addFilter(quiet)
    try:
        for r in range(repeats):
            late = time_limit is not None and time.monotonic() - start > time_limit
            if r >= max(1, min_repeats) and late:
                break
            for p in probes:
                out[p.name].runs.append(p())
                if on_run is not None:
                    on_run(p.name, r)
    finally:
        tf_logger.removeFilter(quiet)
    return out


def measure_one(probe: Probe, *, repeats: int, on_run: OnRun | None = None) -> Measurement:
    """One variant alone, `repeats` times."""
    return side_by_side([probe], repeats=repeats, on_run=on_run)[probe.name]


def measure_datasets(
    datasets: Mapping[str, Any],
    *,
    repeats: int,
    batches: int,
    warmup: int,
    on_run: OnRun | None = None,
) -> dict[str, Measurement]:
    """Batched datasets side by side, repeats interleaved (benchmarks compare variants so)."""
    probes = [pipeline_probe(n, ds, batches=batches, warmup=warmup) for n, ds in datasets.items()]
    return side_by_side(probes, repeats=repeats, on_run=on_run)
