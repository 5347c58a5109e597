"""California housing split into 20 CSV files, read line by line and parsed per line.

Source: ageron/handson-ml3 13_loading_and_preprocessing_data.ipynb (Hands-On Machine
Learning, 3rd ed., chapter 13, "Putting Everything Together": csv_reader_dataset:
list_files(filepaths, seed=42), interleave(TextLineDataset(f).skip(1), cycle_length=5),
map(preprocess, num_parallel_calls=5) with parse_csv_line (decode_csv of one line) and
(x - X_mean) / X_std, shuffle(10_000, seed=42), batch(32), prefetch(1); Dense(30) +
Dense(1), mse).

Flaw: decode_csv one line at a time before the shuffle; the scaler's float64 statistics;
prefetch(1).
Twin: interleave the files with parallel reads, shuffle the lines, batch, one decode_csv
per batch and the scaling in a parallel map (statistics as float32 constants), prefetch.
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = (
    "ageron/handson-ml3 13_loading_and_preprocessing_data.ipynb "
    "(Hands-On ML 3rd ed., ch. 13: Loading and Preprocessing Data)"
)
FORMAT = "CSV files (20 parts, numbers)"
FLAW = "decode_csv per line (5 threads) before shuffle; float64 scaler; prefetch(1)"
TWIN = "parallel interleave, shuffle lines, batch, decode_csv per batch, prefetch"
BATCH_SIZE = 32
n_inputs = 8
HEADER = "MedInc,HouseAge,AveRooms,AveBedrms,Population,AveOccup,Latitude,Longitude"


def _train_filepaths(dir: str) -> list[str]:
    return sorted(str(p) for p in (Path(dir) / "housing").glob("my_train_*.csv"))


# California housing's training rows in the book's split (of 20,640).
FULL = 11610


def make_data(dir: str, size: str = "small") -> None:
    housing_dir = Path(dir) / "housing"
    housing_dir.mkdir(parents=True)
    rng = np.random.default_rng(8)
    n = count(size, 1000, FULL)
    data = np.c_[rng.normal(3.0, 1.5, (n, n_inputs)), rng.uniform(0.5, 5.0, (n, 1))]
    for file_idx, row_indices in enumerate(np.array_split(np.arange(len(data)), 20)):
        with open(housing_dir / f"my_train_{file_idx:02d}.csv", "w") as f:
            f.write(HEADER + ",MedianHouseValue\n")
            for row_idx in row_indices:
                f.write(",".join([str(col) for col in data[row_idx]]))
                f.write("\n")


def _scaler(dir: str) -> tuple[np.ndarray, np.ndarray]:
    """StandardScaler().fit(X_train): its mean_ and scale_ (float64)."""
    X_train = np.concatenate(
        [np.loadtxt(p, delimiter=",", skiprows=1)[:, :n_inputs] for p in _train_filepaths(dir)]
    )
    return X_train.mean(axis=0), X_train.std(axis=0)


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    X_mean, X_std = _scaler(dir)

    def parse_csv_line(line):
        defs = [0.0] * n_inputs + [tf.constant([], dtype=tf.float32)]
        fields = tf.io.decode_csv(line, record_defaults=defs)
        return tf.stack(fields[:-1]), tf.stack(fields[-1:])

    def preprocess(line):
        x, y = parse_csv_line(line)
        return (x - X_mean) / X_std, y

    def csv_reader_dataset(
        filepaths,
        n_readers=5,
        n_read_threads=None,
        n_parse_threads=5,
        shuffle_buffer_size=10_000,
        seed=42,
        batch_size=32,
    ):
        dataset = tf.data.Dataset.list_files(filepaths, seed=seed)
        dataset = dataset.interleave(
            lambda filepath: tf.data.TextLineDataset(filepath).skip(1),
            cycle_length=n_readers,
            num_parallel_calls=n_read_threads,
        )
        dataset = dataset.map(preprocess, num_parallel_calls=n_parse_threads)
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed)
        return dataset.batch(batch_size).prefetch(1)

    return csv_reader_dataset(_train_filepaths(dir), batch_size=batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    X_mean, X_std = (tf.constant(v, tf.float32) for v in _scaler(dir))
    AUTOTUNE = tf.data.AUTOTUNE

    def preprocess_batch(lines):
        fields = tf.io.decode_csv(lines, record_defaults=[0.0] * (n_inputs + 1))
        x = tf.stack(fields[:-1], axis=1)
        return (x - X_mean) / X_std, tf.stack(fields[-1:], axis=1)

    files = tf.data.Dataset.list_files(_train_filepaths(dir), seed=42)
    ds = files.interleave(
        lambda f: tf.data.TextLineDataset(f).skip(1), cycle_length=5, num_parallel_calls=AUTOTUNE
    )
    ds = ds.shuffle(10_000, seed=42).batch(batch_size)
    return ds.map(preprocess_batch, num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)


def model() -> keras.Model:
    m = keras.Sequential(
        [
            keras.Input((n_inputs,)),
            keras.layers.Dense(30, activation="relu", kernel_initializer="he_normal"),
            keras.layers.Dense(1),
        ]
    )
    m.compile(loss="mse", optimizer="sgd")
    return m
