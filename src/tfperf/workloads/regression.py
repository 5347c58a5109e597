"""The queues-vs-feed_dict tutorial's toy problem: 1024 N(0,1) features, label 1 when
their sum is positive.

Holds the generator, the tuned batch step (a cast), the original baseline (numpy batches
handed over from Python every step, here through Dataset.from_generator over shards read
in pure Python) and the original model.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.data.verify import iter_tfrecord
from tfperf.workloads.base import BinaryLogitsWorkload, Row

if TYPE_CHECKING:
    import keras
    import tensorflow as tf


class RegressionWorkload(BinaryLogitsWorkload):
    name = "regression"
    description = "1024 normal features, label = sum > 0, Dense(1024) -> logit"
    default_batch_size = 128  # the original's batch
    # The original's optimizer and learning rate.
    # The original's Adam(1e-2); the train loop reads these when the run file sets none.
    optimizer = default_optimizer = "adam"
    learning_rate = default_learning_rate = 1e-2

    def __init__(self, features: int = 1024, hidden: int = 1024):
        if features < 1 or hidden < 1:
            raise ValueError(
                f"regression options: expected features, hidden >= 1, found {features}, {hidden}"
            )
        super().__init__(features=features, hidden=hidden)
        self.features = features
        self.hidden = hidden

    # ---- data ------------------------------------------------------------------------
    def raw_schema(self) -> Schema:
        return Schema.of(
            Feature(name="x", dtype="float32", shape=(self.features,)),
            Feature(name="y", dtype="int64"),
        )

    def generate(self, n: int, seed: int = 0) -> Iterator[Row]:
        rng = np.random.default_rng(seed)
        chunk = 1024
        for start in range(0, n, chunk):
            x = rng.standard_normal((min(chunk, n - start), self.features), dtype=np.float32)
            # Summed in float64 so that the label does not depend on summation order.
            y = (x.astype(np.float64).sum(axis=1) > 0).astype(np.int64)
            for xi, yi in zip(x, y, strict=True):
                yield {"x": xi, "y": yi}

    # ---- the tuned pipeline --------------------------------------------------------------
    def preprocess_batch(self, batch: dict[str, tf.Tensor]) -> tuple[Any, Any]:
        import tensorflow as tf

        return batch["x"], tf.cast(batch["y"], tf.float32)[:, None]

    # ---- the original: numpy batches from Python every step ---------------------------------
    def numpy_batches(
        self, files: Sequence[str], batch_size: int, *, training: bool, seed: int | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The original feed: records read and decoded in Python, stacked into numpy batches.

        Training: shuffled file order each pass, forever, full batches only;
        evaluation: files in order, one pass, the last batch may be short.
        """
        schema = self.raw_schema()
        rng = random.Random(seed)
        while True:
            order = list(files)
            if training:
                rng.shuffle(order)
            xs: list[np.ndarray] = []
            ys: list[float] = []
            full = 0
            for path in order:
                for record in iter_tfrecord(path):
                    row = schema.decode_numpy(record)
                    xs.append(row["x"])
                    ys.append(float(row["y"]))
                    if len(xs) == batch_size:
                        full += 1
                        yield np.stack(xs), np.asarray(ys, np.float32)[:, None]
                        xs, ys = [], []
            if training and not full:  # repeating would spin forever without a batch
                raise ValueError(f"regression: fewer records than one batch of {batch_size}")
            if not training:
                if xs:
                    yield np.stack(xs), np.asarray(ys, np.float32)[:, None]
                return

    def original_dataset(
        self, files: Sequence[str], batch_size: int, *, training: bool, seed: int | None = None
    ) -> tf.data.Dataset:
        """Dataset.from_generator over `numpy_batches`: every batch crosses from Python,
        one at a time, as feed_dict did in the original."""
        import tensorflow as tf

        files = list(files)
        return tf.data.Dataset.from_generator(
            lambda: self.numpy_batches(files, batch_size, training=training, seed=seed),
            output_signature=(
                tf.TensorSpec([None, self.features], tf.float32),
                tf.TensorSpec([None, 1], tf.float32),
            ),
        )

    # ---- the model -----------------------------------------------------------------------
    def build_model(self) -> keras.Model:
        """The original model: Dense(1024, relu) -> Dense(1), a logit."""
        import keras

        x = keras.Input(shape=(self.features,), name="x")
        h = keras.layers.Dense(self.hidden, activation="relu")(x)
        out = keras.layers.Dense(1, name="logit")(h)
        return keras.Model(x, out, name="regression")
