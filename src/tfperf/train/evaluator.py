"""Evaluating one checkpoint: the run file's model and eval split, built once, restored
from a checkpoint and averaged over the eval data (loss and each metric).

Following a training run's checkpoints is train/watch.py, its outputs (eval/* scalars,
eval_results.jsonl, best/) train/eval_outputs.py, the child process the training loop
starts train/evaluator_process.py. Nothing here writes files.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from tfperf.config import RunConfig
from tfperf.data.manifest import ManifestError
from tfperf.errors import UserError
from tfperf.inputs.datasets import make_input_dataset
from tfperf.train.checkpoints.folder import resolve_prefix, run_dirs
from tfperf.train.eval_outputs import check_eval_metric
from tfperf.train.fit_check import check_fit
from tfperf.train.model import adapt_features, build_model_and_loss
from tfperf.train.objectives import to_float32
from tfperf.train.run_input import first_of
from tfperf.train.warm_start import read_checkpoint_variables
from tfperf.util.progress import progress_bar

if TYPE_CHECKING:
    import tensorflow as tf

console = Console(stderr=True, soft_wrap=True)  # log lines stay whole (greppable)


class CheckpointMismatchError(UserError):
    """A checkpoint whose variables do not fit the run file's model."""


def run_paths(cfg: RunConfig) -> tuple[Path, Path, Path]:
    """(out_dir, checkpoints dir, eval log dir), as the training loop lays them out."""
    dirs = run_dirs(cfg)
    return dirs.out_dir, dirs.checkpoint_dir, dirs.eval_logs


def eval_dataset(cfg: RunConfig, max_batches: int | None = None) -> tf.data.Dataset:
    """The eval split's batches (eval.batch_size), which must end unless `max_batches`."""
    import tensorflow as tf

    batch = cfg.eval.batch_size or cfg.pipeline.batch_size
    ds = make_input_dataset(cfg, training=False, batch_size=batch)
    if ds.cardinality() == tf.data.INFINITE_CARDINALITY and max_batches is None:
        raise UserError(
            "eval.steps: the eval dataset repeats forever; set eval.steps (batches per "
            "evaluation) or make data.pipeline return one epoch when training=False"
        )
    return ds


def check_eval_settings(cfg: RunConfig, metric_names: list[str]) -> None:
    """What the watching evaluator would stop at, checked before training starts (`train
    --evaluator`): its eval split builds and ends, and eval.metric is one it computes."""
    try:
        eval_dataset(cfg, cfg.eval.steps)
    except ManifestError as exc:  # no such split
        raise UserError(
            f"--evaluator: the evaluator reads data.eval_split '{cfg.data.eval_split}': {exc}; "
            "convert an eval split beside the training data (`tfperf convert SOURCE --out "
            f"DIR --split eval`), or set data.eval_split in {cfg.origin('data.eval_split')}"
        ) from None
    except UserError as exc:
        raise UserError(f"--evaluator: {exc}") from None
    check_eval_metric(cfg, ["loss", *metric_names])


class Evaluator:
    """The run file's model and eval data, built once; `evaluate(prefix)` restores a
    checkpoint into the model and returns the mean loss and metrics over the eval split
    (at most `max_batches` batches of it, else eval.steps, else all of it)."""

    def __init__(self, cfg: RunConfig, *, max_batches: int | None = None, progress: bool = False):
        # TensorFlow is imported on first use so that `tfperf --help` stays fast.
        import tensorflow as tf

        self.cfg = cfg
        self.progress = progress
        self.max_batches = max_batches or cfg.eval.steps
        self.model, wanted = build_model_and_loss(cfg)
        self._adapt = adapt_features
        self.dataset = eval_dataset(cfg, self.max_batches)
        # Builds the model, checks it against the eval batches (inputs, outputs, labels) and
        # pairs the outputs with the labels, losses and metrics.
        self.objectives = check_fit(
            cfg, self.model, self.dataset.element_spec, wanted, first_of(self.dataset)
        )
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
        # Only model and step: the evaluator never needs the optimizer or the iterator.
        self.checkpoint = tf.train.Checkpoint(model=self.model, step=self.step)
        # Batch shapes vary (the last batch of an epoch): trace generically, not per shape.
        self._batch_fn = tf.function(self._batch, reduce_retracing=True)

    @property
    def metric_names(self) -> list[str]:
        """The names of every metric `measure` reports besides the loss."""
        return self.objectives.names

    def _batch(self, features: Any, labels: Any, sample_weight: Any = None) -> dict[str, Any]:
        import tensorflow as tf

        pred = self.model(self._adapt(self.model, features), training=False)
        pred = tf.nest.map_structure(to_float32, pred)
        per, each = self.objectives.losses(labels, pred, sample_weight)
        out = {"_n": tf.cast(tf.shape(per)[0], tf.float32), "loss": tf.reduce_sum(per)}
        values = {**each, **self.objectives.metric_values(labels, pred)}
        out.update({name: tf.reduce_sum(v) for name, v in values.items()})
        self.objectives.update_stateful(labels, pred)
        return out

    def check_fits(self, prefix: str) -> None:
        """Raises CheckpointMismatchError unless every model variable's shape is in the
        checkpoint. Shapes, not names: Keras names unnamed layers per process (dense_3)."""
        saved = Counter(shape for _, shape in read_checkpoint_variables(prefix).values())
        wanted = Counter(tuple(v.shape) for v in self.model.weights)
        lacking = wanted - saved
        if lacking:
            shapes = ", ".join(str(s) for s in list(lacking)[:5])
            raise CheckpointMismatchError(
                f"{prefix}: does not fit the model of {self.cfg.source or 'the run file'}: "
                f"no saved variable of shape {shapes}; was it written by this run file?"
            )

    def restore(self, prefix: str) -> int:
        """Loads model weights and step from `prefix`; returns the saved step."""
        self.check_fits(prefix)
        self.checkpoint.read(prefix).expect_partial()
        return int(self.step.numpy())

    def evaluate(self, prefix: str) -> tuple[int, dict[str, float], int]:
        """(step, {'loss': ..., metric: ...}, examples) of one checkpoint."""
        step = self.restore(prefix)
        return (step, *self.measure(step))

    def measure(self, step: int) -> tuple[dict[str, float], int]:
        """({'loss': ..., metric: ...}, examples) of the weights restored last (`step`)."""
        sums: dict[str, float] = {}
        ds = self.dataset.take(self.max_batches) if self.max_batches else self.dataset
        with progress_bar(
            f"eval step {step}",
            total=self.max_batches,
            enabled=self.progress,
            transient=True,
            console=console,
        ) as bar:
            # Stateful metrics (AUC, ...) over the whole split, as evaluate reports them.
            self.objectives.reset_stateful()
            for batch in ds:
                for k, v in self._batch_fn(*batch).items():  # (x, y) or (x, y, sample_weight)
                    sums[k] = sums.get(k, 0.0) + float(v)
                bar.advance()
        n = sums.pop("_n", 0.0)
        if n == 0:
            raise UserError(f"data.eval_split: '{self.cfg.data.eval_split}' gave no examples")
        means = {k: v / n for k, v in sums.items()}
        means.update({k: float(m.result()) for k, m in self.objectives.stateful})
        return means, int(n)


def evaluate_checkpoint(cfg: RunConfig, path: str) -> dict[str, float]:
    """Mean eval loss and metrics of one checkpoint (a ckpt-N prefix or a checkpoints dir)."""
    prefix = resolve_prefix(path)
    _, metrics, _ = Evaluator(cfg).evaluate(prefix)
    return metrics
