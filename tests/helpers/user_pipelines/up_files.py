"""User pipelines over raw files (JPEGs in class folders, a TSV of sentences, a CSV),
written the way tutorials write them, each beside its hand-tuned twin (`<name>_tuned`):
`make_dataset(data_dir, batch_size=..., **kwargs)`."""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE
SIZE = 48  # images are resized to SIZE x SIZE
SEQ, BUCKETS = 32, 1000  # tokens per sentence (truncated / padded), hash buckets
COLUMNS = 32  # CSV feature columns (then the label)


# ---- images: read, decode and resize one file at a time -------------------------------------
def load_image(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    image = tf.image.resize(image, [SIZE, SIZE]) / 255.0
    label = tf.cast(tf.strings.regex_full_match(path, ".*dogs.*"), tf.float32)
    return image, tf.reshape(label, [1])


def image_decode(data_dir, batch_size=64, **kwargs):
    dataset = tf.data.Dataset.list_files(f"{data_dir}/*/*.jpg")
    dataset = dataset.map(load_image)
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


def image_decode_tuned(data_dir, batch_size=64, **kwargs):
    ds = tf.data.Dataset.list_files(f"{data_dir}/*/*.jpg", shuffle=False)
    ds = ds.map(load_image, num_parallel_calls=AUTOTUNE).cache()  # decoded once
    return ds.shuffle(1024).batch(batch_size).prefetch(AUTOTUNE)


# ---- text: tokenized one sentence at a time ---------------------------------------------------
def tokenize_line(line):
    parts = tf.strings.split(line, "\t", maxsplit=1)
    label, sentence = parts[0], parts[1]
    words = tf.strings.split(tf.strings.lower(sentence))[:SEQ]
    ids = tf.strings.to_hash_bucket_fast(words, BUCKETS) + 1  # 0 pads
    ids = tf.pad(ids, [[0, SEQ - tf.shape(ids)[0]]])
    ids.set_shape([SEQ])
    return ids, tf.reshape(tf.strings.to_number(label), [1])


def tokenize_lines(lines):
    parts = tf.strings.split(lines, "\t", maxsplit=1).to_tensor(shape=[None, 2])
    words = tf.strings.split(tf.strings.lower(parts[:, 1]))
    ids = tf.ragged.map_flat_values(tf.strings.to_hash_bucket_fast, words, BUCKETS) + 1
    return ids.to_tensor(shape=[None, SEQ]), tf.strings.to_number(parts[:, :1])


def text_per_example(data_dir, batch_size=64, **kwargs):
    dataset = tf.data.TextLineDataset(f"{data_dir}/reviews.tsv")
    dataset = dataset.map(tokenize_line)
    dataset = dataset.shuffle(1000).batch(batch_size)
    return dataset.prefetch(AUTOTUNE)


def text_per_example_tuned(data_dir, batch_size=64, **kwargs):
    ds = tf.data.TextLineDataset(f"{data_dir}/reviews.tsv").shuffle(1000).batch(batch_size)
    return ds.map(tokenize_lines, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)


# ---- text through a Python tokenizer (py_function) --------------------------------------------
def python_tokenize(line: bytes) -> tuple[np.ndarray, np.ndarray]:
    label, sentence = line.decode().split("\t", 1)
    ids = [hash_word(w) for w in re.findall(r"\w+", sentence.lower())][:SEQ]
    return np.array(ids + [0] * (SEQ - len(ids)), "int64"), np.array([float(label)], "float32")


def hash_word(word: str) -> int:
    return sum(ord(c) * 31**i for i, c in enumerate(word)) % BUCKETS + 1


def py_function_tokenizer(data_dir, batch_size=64, **kwargs):
    def tokenize(line):
        ids, label = tf.py_function(
            lambda t: python_tokenize(t.numpy()), [line], [tf.int64, tf.float32]
        )
        ids.set_shape([SEQ])
        label.set_shape([1])
        return ids, label

    dataset = tf.data.TextLineDataset(f"{data_dir}/reviews.tsv")
    dataset = dataset.map(tokenize)
    return dataset.batch(batch_size).prefetch(AUTOTUNE)


def py_function_tokenizer_tuned(data_dir, batch_size=64, **kwargs):
    # Tokenized once, offline, then kept in memory (the data is small).
    with open(f"{data_dir}/reviews.tsv", "rb") as f:
        pairs = [python_tokenize(line.rstrip(b"\n")) for line in f]
    ids = np.stack([p[0] for p in pairs])
    labels = np.stack([p[1] for p in pairs])
    ds = tf.data.Dataset.from_tensor_slices((ids, labels))
    return ds.batch(batch_size).prefetch(AUTOTUNE)


# ---- CSV: one line at a time through decode_csv ------------------------------------------------
DEFAULTS = [[0.0]] * COLUMNS + [[0.0]]


def decode_line(line):
    values = tf.io.decode_csv(line, record_defaults=DEFAULTS)
    return tf.stack(values[:-1]), tf.reshape(values[-1], [1])


def decode_lines(lines):
    values = tf.io.decode_csv(lines, record_defaults=DEFAULTS)
    return tf.stack(values[:-1], axis=1), tf.expand_dims(values[-1], 1)


def csv_per_line(data_dir, batch_size=64, **kwargs):
    dataset = tf.data.TextLineDataset(f"{data_dir}/table.csv").skip(1)
    dataset = dataset.map(decode_line)
    dataset = dataset.shuffle(1000).batch(batch_size)
    return dataset.prefetch(AUTOTUNE)


def csv_per_line_tuned(data_dir, batch_size=64, **kwargs):
    ds = tf.data.TextLineDataset(f"{data_dir}/table.csv").skip(1)
    ds = ds.shuffle(1000).batch(batch_size)
    return ds.map(decode_lines, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
