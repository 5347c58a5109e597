"""TensorBoard for training: scalars in logs/train (loss and metrics under the tags the
evaluator uses in logs/eval, learning rate, examples/s, step time, input/*), histograms of
every trainable variable every N steps, and the train function's op graph once. A hook; it
only writes what the loop measured (see observe/feed.py).
"""

from __future__ import annotations

from typing import Any

from tfperf.hooks import Hook, RunState


def make_writer(path: Any, enabled: bool = True) -> Any:
    """A summary writer, or a no-op one (non-chief workers write nothing)."""
    import tensorflow as tf

    if not enabled:
        return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(str(path))


def write_scalars(writer: Any, step: int, values: dict[str, float]) -> None:
    import tensorflow as tf

    with writer.as_default(step=step):
        for name, value in values.items():
            if value is not None:
                tf.summary.scalar(name, float(value))


def write_histograms(writer: Any, step: int, variables: Any) -> None:
    import tensorflow as tf

    with writer.as_default(step=step):
        for v in variables:
            # Keras 3 paths ("dense/kernel") are unique within a model.
            name = getattr(v, "path", None) or v.name
            tf.summary.histogram(f"weights/{name}", tf.convert_to_tensor(v))


def write_graph(writer: Any, graph: Any) -> bool:
    """The op graph of a traced function (TensorBoard's Graphs tab)."""
    import tensorflow as tf

    try:
        with writer.as_default():
            tf.summary.graph(graph)
        return True
    except Exception:  # noqa: BLE001 - a graph the summary cannot hold is not fatal
        return False


# Keys of the loop's logs that are bookkeeping, not metrics.
_NOT_SCALARS = ("first_step", "steps")
METRICS_PREFIX = "metrics/"


def tag(key: str) -> str:
    """The TensorBoard tag of a log key: metrics under their own names (loss, accuracy),
    as the evaluator writes them in logs/eval, so that TensorBoard draws training and
    evaluation on one chart (as Keras does); learning_rate, step/*, input/* and system/*
    keep their names."""
    return key.removeprefix(METRICS_PREFIX)


class SummaryHook(Hook):
    """Scalars every `log_every` steps (and at the end), histograms every `histogram_every`
    steps, and the graph after the first call (the function is traced by then)."""

    def __init__(self, log_every: int, histogram_every: int):
        self.log_every = log_every
        self.histogram_every = histogram_every
        self.graph_written = False
        self.last_logged = -1
        self.last_hist = -1

    def _crossed(self, first: int, step: int, every: int) -> bool:
        # A call covering steps first..step crosses a multiple of `every` somewhere inside.
        return step // every > (first - 1) // every

    def on_loop_end(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        writer = run.train_writer
        first = int(logs.get("first_step", step))
        if self._crossed(first, step, self.log_every):
            self._scalars(run, step, logs)
        if self._crossed(first, step, self.histogram_every):
            write_histograms(writer, step, run.model.trainable_variables)
            self.last_hist = step
        if not self.graph_written and run.train_step is not None and run.iterator is not None:
            try:
                graph = run.train_step.concrete_function(run.iterator).graph
            except Exception:  # noqa: BLE001 - e.g. per-worker iterators under parameter_server
                graph = None
            self.graph_written = graph is not None and write_graph(writer, graph)

    def _scalars(self, run: RunState, step: int, logs: dict[str, float]) -> None:
        values = {tag(k): v for k, v in logs.items() if k not in _NOT_SCALARS}
        write_scalars(run.train_writer, step, values)
        self.last_logged = step

    def on_train_end(self, run: RunState, logs: dict[str, float]) -> None:
        if logs and self.last_logged != run.step:
            self._scalars(run, run.step, logs)
        if self.last_hist != run.step:
            write_histograms(run.train_writer, run.step, run.model.trainable_variables)
        run.train_writer.flush()
