"""What a built-in workload provides: a deterministic generator, its schema, the tuned
batch preprocessing (run by data/pipeline.py after one batched parse), the original author's
original pipeline (the baseline to beat), and a Keras 3 model with its loss.

A workload never builds the tuned tf.data pipeline itself: data/pipeline.py owns the
stage order; the workload only supplies whole-batch functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tfperf.data.schema import Schema

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

Row = dict[str, Any]


class Workload:
    """Base class; subclasses set the class attributes and implement the methods."""

    name: str = ""
    description: str = ""
    default_batch_size: int = 512
    # When True the tuned preprocessing must run per example (map before batch);
    # data/pipeline.py then maps `preprocess_example` instead of `preprocess_batch`.
    per_example: bool = False
    # The optimizer and learning rate the train loop uses when the run file sets none.
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    default_optimizer: str = "adam"
    default_learning_rate: float = 1e-3

    def __init__(self, **options: Any):
        self.options = options

    # A Keras loss and metrics, by name or object: subclasses set them as class attributes
    # (loss = "mse") or, for objects that need Keras, as properties (BinaryLogitsWorkload).
    @property
    def loss(self) -> Any:
        return "mse"

    @property
    def metrics(self) -> Sequence[Any]:
        return ()

    # ---- data ------------------------------------------------------------------------
    def raw_schema(self) -> Schema:
        """Schema of what `generate` yields (before any offline preprocessing)."""
        raise NotImplementedError

    def schema(self) -> Schema:
        """Schema of the converted shards that the tuned pipeline reads."""
        return self.raw_schema()

    def generate(self, n: int, seed: int = 0) -> Iterator[Row]:
        """n deterministic rows of raw data (same n and seed: same rows)."""
        raise NotImplementedError

    def offline_preprocess(self) -> Callable[[Row], Row] | None:
        """Heavy per-row work done once by `convert` (offline preprocessing); None if none."""
        return None

    # ---- the tuned pipeline's stages (whole batches of parsed, decoded tensors) --------
    def preprocess_batch(self, batch: dict[str, tf.Tensor]) -> tuple[Any, Any]:
        """(features, labels) from one parsed batch; vectorized, graph-only TF ops."""
        raise NotImplementedError

    def preprocess_example(self, example: dict[str, tf.Tensor]) -> tuple[Any, Any]:
        """Per-example variant, used only when `per_example` is True."""
        raise NotImplementedError

    # ---- the original pipeline, as its original author wrote it --------------------------
    def original_dataset(
        self, files: Sequence[str], batch_size: int, *, training: bool, seed: int | None = None
    ) -> tf.data.Dataset:
        """The baseline: (features, labels) batches built the original author's way.

        `files` are the shards the original reads (see `original_needs_raw`).
        With training=False it must be deterministic and unshuffled so that its values
        can be compared with the tuned pipeline's.
        """
        raise NotImplementedError

    # True when the original reads raw (not offline-preprocessed) shards, written by
    # `convert` to the split named `raw_split(split)`.
    original_needs_raw: bool = False

    @staticmethod
    def raw_split(split: str) -> str:
        return f"{split}_raw"

    # ---- the model -----------------------------------------------------------------------
    def build_model(self) -> keras.Model:
        raise NotImplementedError


class BinaryLogitsWorkload(Workload):
    """A workload whose model outputs logits for a binary target (per example or pixel)."""

    @property
    def loss(self) -> Any:
        import keras

        return keras.losses.BinaryCrossentropy(from_logits=True)

    @property
    def metrics(self) -> list[Any]:
        import keras

        # A logit > 0 means p > 0.5: accuracy on logits thresholds at 0.
        return [keras.metrics.BinaryAccuracy(threshold=0.0, name="accuracy")]
