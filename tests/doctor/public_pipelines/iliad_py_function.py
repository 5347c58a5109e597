"""Three translations of the Iliad, line by line, encoded by a Python tokenizer in
tf.py_function, padded_batch.

Source: tensorflow/docs site/en/tutorials/load_data/text.ipynb at commit e876022a0 (2020;
"Load text": TextLineDataset per file, map(lambda ex: labeler(ex, i)), concatenate,
shuffle(BUFFER_SIZE, reshuffle_each_iteration=False), tfds.deprecated.text.Tokenizer and
TokenTextEncoder over the vocabulary, encode_map_fn = tf.py_function(encode) with
set_shape, all_encoded_data.skip(TAKE_SIZE).shuffle(BUFFER_SIZE).padded_batch(BATCH_SIZE);
Embedding, Bidirectional(LSTM), Dense, Dense(3)).

Flaw: a Python tokenizer per line through tf.py_function (the GIL, one line at a time,
sequential), before the shuffle; per-line labeler maps.
Twin: the lines encoded once in Python (the same encoder), kept in memory as a ragged
tensor, shuffled, padded per batch, prefetched.
Compared: with take_size=0 (the tutorial's unseeded one-time shuffle would hand each
pipeline a different held-out part), one epoch, ignoring order, padding stripped (padded
rows depend on their batch).
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = "tensorflow/docs site/en/tutorials/load_data/text.ipynb (Load text, 2020 version)"
FORMAT = "text files (one example per line)"
FLAW = "tf.py_function Python tokenizer per line, sequential; per-line label maps"
TWIN = "encode once in Python, ragged in memory, shuffle, pad per batch, prefetch"
BATCH_SIZE = 64
SAME_KWARGS = {"take_size": 0}
FILE_NAMES = ["cowper.txt", "derby.txt", "butler.txt"]
BUFFER_SIZE = 50000
TAKE_SIZE = 100
WORDS = "the and of to his he with in son achilles ships gods troy hector spear".split()
_ENCODERS: dict[str, object] = {}


# The three translations' lines (cowper, derby, butler), about 16,500 a file.
FULL = 49608


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(11)
    for i, name in enumerate(FILE_NAMES):
        lines = [
            " ".join(rng.choice(WORDS + [f"w{i}"], size=int(rng.integers(3, 12))))
            for _ in range(count(size, 200, FULL // 3))
        ]
        (Path(dir) / name).write_text("\n".join(lines) + "\n")


def _labeled(dir: str) -> tf.data.Dataset:
    def labeler(example, index):
        return example, tf.cast(index, tf.int64)

    labeled_data_sets = []
    for i, file_name in enumerate(FILE_NAMES):
        lines_dataset = tf.data.TextLineDataset(str(Path(dir) / file_name))
        labeled_dataset = lines_dataset.map(lambda ex, i=i: labeler(ex, i))
        labeled_data_sets.append(labeled_dataset)
    all_labeled_data = labeled_data_sets[0]
    for labeled_dataset in labeled_data_sets[1:]:
        all_labeled_data = all_labeled_data.concatenate(labeled_dataset)
    return all_labeled_data


def _encoder(dir: str):
    """The tutorial's TokenTextEncoder over the vocabulary of all lines (once per folder:
    a set's order differs between processes, so both pipelines share one)."""
    import tensorflow_datasets as tfds

    if dir not in _ENCODERS:
        tokenizer = tfds.deprecated.text.Tokenizer()
        vocabulary_set = set()
        for text_tensor, _ in _labeled(dir):
            vocabulary_set.update(tokenizer.tokenize(text_tensor.numpy()))
        _ENCODERS[dir] = tfds.deprecated.text.TokenTextEncoder(vocabulary_set)
    return _ENCODERS[dir]


def original(dir: str, batch_size: int = BATCH_SIZE, take_size: int = TAKE_SIZE):
    encoder = _encoder(dir)
    all_labeled_data = _labeled(dir).shuffle(BUFFER_SIZE, reshuffle_each_iteration=False)

    def encode(text_tensor, label):
        encoded_text = encoder.encode(text_tensor.numpy())
        return encoded_text, label

    def encode_map_fn(text, label):
        encoded_text, label = tf.py_function(encode, inp=[text, label], Tout=(tf.int64, tf.int64))
        encoded_text.set_shape([None])
        label.set_shape([])
        return encoded_text, label

    all_encoded_data = all_labeled_data.map(encode_map_fn)
    train_data = all_encoded_data.skip(take_size).shuffle(BUFFER_SIZE)
    train_data = train_data.padded_batch(batch_size)
    return train_data


def tuned(dir: str, batch_size: int = BATCH_SIZE, take_size: int = TAKE_SIZE):
    encoder = _encoder(dir)
    texts, labels = [], []
    for text, label in _labeled(dir).as_numpy_iterator():
        texts.append(encoder.encode(text))
        labels.append(label)
    order = np.random.permutation(len(texts))[take_size:]  # the held-out part, once
    ids = tf.ragged.constant([texts[i] for i in order], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((ids, np.array(labels)[order]))
    ds = ds.shuffle(BUFFER_SIZE).batch(batch_size)
    ds = ds.map(lambda x, y: (x.to_tensor(), y), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def comparable(ds: tf.data.Dataset) -> tf.data.Dataset:
    """Examples with their padding stripped (ids are >= 1; 0 pads)."""
    return ds.unbatch().map(lambda x, y: (tf.boolean_mask(x, x > 0), y))


def model() -> keras.Model:
    vocab_size = len(WORDS) + 4 + 2  # the stand-in's words, w0-w2, padding and OOV
    m = keras.Sequential(
        [
            keras.Input((None,), dtype="int64"),
            keras.layers.Embedding(vocab_size, 16),
            keras.layers.Bidirectional(keras.layers.LSTM(8)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(3),
        ]
    )
    m.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m
