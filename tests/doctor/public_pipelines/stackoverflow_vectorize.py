"""Stack Overflow questions from a folder of text files, vectorized after the cache.

Source: tensorflow/docs site/en/tutorials/load_data/text.ipynb ("Load text", section
"Example 1: Predict the tag for a Stack Overflow question": text_dataset_from_directory
(batch_size=32, validation_split=0.2, subset='training', seed=42), cache().prefetch(AUTOTUNE),
TextVectorization(max_tokens=10000, output_mode='int', output_sequence_length=250) adapted
on the training text, int_train_ds = raw_train_ds.map(lambda x, y: (int_vectorize_layer(x),
y)); create_model: Embedding(mask_zero=True), Dropout, Conv1D, GlobalMaxPooling1D, Dense(4)).

Flaw: the vectorizing map comes after the prefetch, sequential, with no prefetch behind it;
the cache holds the first epoch's batches (the utility's reshuffle is frozen).
Twin: the utility unbatched (the same files of the split), cache the raw strings, shuffle,
batch, vectorize per batch in a parallel map, prefetch.
Compared: one epoch, ignoring order (both share one adapted vectorizer per folder).
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from ._shared import count

SOURCE = "tensorflow/docs site/en/tutorials/load_data/text.ipynb (Load text)"
FORMAT = "text files in class folders"
FLAW = "sequential TextVectorization map after cache().prefetch(), no prefetch after it"
TWIN = "cache strings, shuffle, batch, parallel vectorize per batch, prefetch"
BATCH_SIZE = 32
VOCAB_SIZE = 10000
MAX_SEQUENCE_LENGTH = 250
TAGS = ["csharp", "java", "javascript", "python"]
WORDS = "how do i sort a list in my code when the function returns null string array loop".split()
_VECTORIZERS: dict[str, layers.TextVectorization] = {}


# The Stack Overflow set's training files (2,000 per tag).
FULL = 8000


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(10)
    for t, tag in enumerate(TAGS):
        folder = Path(dir) / "train" / tag
        folder.mkdir(parents=True)
        for i in range(count(size, 24, FULL // len(TAGS))):
            words = rng.choice(WORDS + [tag] * 3, size=int(rng.integers(8, 60)))
            (folder / f"{t}{i}.txt").write_text(" ".join(words) + "\n")


def _raw(dir: str, batch_size: int | None) -> tf.data.Dataset:
    return keras.utils.text_dataset_from_directory(
        str(Path(dir) / "train"),
        batch_size=batch_size,
        validation_split=0.2,
        subset="training",
        seed=42,
    )


def _vectorizer(dir: str) -> layers.TextVectorization:
    """int_vectorize_layer adapted on the training text (once per folder)."""
    if dir not in _VECTORIZERS:
        int_vectorize_layer = layers.TextVectorization(
            max_tokens=VOCAB_SIZE,
            output_mode="int",
            output_sequence_length=MAX_SEQUENCE_LENGTH,
        )
        int_vectorize_layer.adapt(_raw(dir, 32).map(lambda text, labels: text))
        _VECTORIZERS[dir] = int_vectorize_layer
    return _VECTORIZERS[dir]


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    int_vectorize_layer = _vectorizer(dir)
    raw_train_ds = _raw(dir, batch_size)
    raw_train_ds = raw_train_ds.cache().prefetch(buffer_size=tf.data.AUTOTUNE)
    int_train_ds = raw_train_ds.map(lambda x, y: (int_vectorize_layer(x), y))
    return int_train_ds


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    vectorize = _vectorizer(dir)
    ds = _raw(dir, None).cache().shuffle(10000).batch(batch_size)
    ds = ds.map(lambda x, y: (vectorize(x), y), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    def create_model(vocab_size, num_labels):
        return keras.Sequential(
            [
                keras.Input((MAX_SEQUENCE_LENGTH,), dtype="int64"),
                layers.Embedding(vocab_size, 16, mask_zero=True),
                layers.Dropout(0.5),
                layers.Conv1D(16, 5, padding="valid", activation="relu", strides=2),
                layers.GlobalMaxPooling1D(),
                layers.Dense(num_labels),
            ]
        )

    m = create_model(vocab_size=VOCAB_SIZE + 1, num_labels=4)
    m.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer="adam",
        metrics=["accuracy"],
    )
    return m
