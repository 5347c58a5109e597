"""Chicago transit ridership (5 float64 columns) windowed by timeseries_dataset_from_array.

Source: ageron/handson-ml3 15_processing_sequences_using_rnns_and_cnns.ipynb (Hands-On
Machine Learning, 3rd ed., chapter 15, "Multivariate Time Series": df from the CTA daily
boarding CSV, bus and rail / 1e6, next_day_type one-hot (pd.get_dummies(dtype=float)),
mulvar_train = 2016-01..2018-12; timeseries_dataset_from_array(mulvar_train.to_numpy(),
targets=mulvar_train["rail"][seq_length:], sequence_length=56, batch_size=32,
shuffle=True, seed=42); SimpleRNN(32, input_shape=[None, 5]) + Dense(1), Huber loss, SGD).
pandas is not installed here: the CSV is read and shaped with numpy as pandas would.

Flaw: timeseries_dataset_from_array (a map per window over a float64 array: every window
is a gather of 56 float64 rows, cast later by Keras); no prefetch.
Twin: the array cast to float32 once, window starts shuffled and batched, one gather per
batch in a parallel map, prefetch.
Compared: one epoch, ignoring order, floats as float32 on both sides.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import read_csv

SOURCE = (
    "ageron/handson-ml3 15_processing_sequences_using_rnns_and_cnns.ipynb "
    "(Hands-On ML 3rd ed., ch. 15: Processing Sequences Using RNNs and CNNs)"
)
FORMAT = "CSV of daily counts, as a float64 time series"
FLAW = "timeseries_dataset_from_array over float64: a gather per window"
TWIN = "float32 once, shuffled starts batched, one gather per batch, prefetch"
BATCH_SIZE = 32
seq_length = 56
DAY_TYPES = ["A", "U", "W"]


# The CTA file's daily rows, 2001-01-01 to 2021-11-30 (the book slices 2016-2018 from it).
FULL = 7_639


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(13)
    day = datetime.date(2015, 12, 1) if size == "small" else datetime.date(2001, 1, 1)
    last = datetime.date(2019, 1, 31) if size == "small" else datetime.date(2021, 11, 30)
    lines = ["service_date,day_type,bus,rail_boardings,total_rides"]
    while day <= last:
        weekend = day.weekday() >= 5
        day_type = "A" if day.weekday() == 5 else "U" if weekend else "W"
        bus = int(rng.normal(500_000 if weekend else 800_000, 30_000))
        rail = int(rng.normal(300_000 if weekend else 650_000, 30_000))
        lines.append(f"{day.strftime('%m/%d/%Y')},{day_type},{bus},{rail},{bus + rail}")
        day += datetime.timedelta(days=1)
    (Path(dir) / "CTA_-_Ridership_-_Daily_Boarding_Totals.csv").write_text("\n".join(lines) + "\n")


def load_mulvar(dir: str) -> tuple[np.ndarray, np.ndarray]:
    """(mulvar_train as float64 (n, 5): bus, rail, next_day_type_A/U/W; rail)."""
    df = read_csv(Path(dir) / "CTA_-_Ridership_-_Daily_Boarding_Totals.csv")
    dates = np.array([datetime.datetime.strptime(d, "%m/%d/%Y").date() for d in df["service_date"]])
    order = np.argsort(dates)
    dates, day_type = dates[order], df["day_type"][order]
    bus, rail = df["bus"][order] / 1e6, df["rail_boardings"][order] / 1e6  # float64
    next_day = np.append(day_type[1:], None)  # df["day_type"].shift(-1)
    dummies = np.stack([(next_day == t).astype(float) for t in DAY_TYPES], axis=1)
    mulvar = np.column_stack([bus, rail, dummies])
    train = (dates >= datetime.date(2016, 1, 1)) & (dates <= datetime.date(2018, 12, 31))
    return mulvar[train], rail[train]


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    mulvar_train, rail_train = load_mulvar(dir)
    tf.random.set_seed(42)
    train_mulvar_ds = keras.utils.timeseries_dataset_from_array(
        mulvar_train,  # use all 5 columns as input
        targets=rail_train[seq_length:],  # forecast only the rail series
        sequence_length=seq_length,
        batch_size=batch_size,
        shuffle=True,
        seed=42,
    )
    return train_mulvar_ds


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    mulvar_train, rail_train = load_mulvar(dir)
    series = tf.constant(mulvar_train, tf.float32)
    targets = tf.constant(rail_train, tf.float32)
    starts = len(mulvar_train) - seq_length  # the windows that have a target

    def windows(start):
        idx = start[:, None] + tf.range(seq_length, dtype=start.dtype)[None, :]
        return tf.gather(series, idx), tf.gather(targets, start + seq_length)

    ds = tf.data.Dataset.range(starts).shuffle(starts, seed=42).batch(batch_size)
    return ds.map(windows, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    m = keras.Sequential(
        [keras.Input((None, 5)), keras.layers.SimpleRNN(32), keras.layers.Dense(1)]
    )
    opt = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    m.compile(loss=keras.losses.Huber(), optimizer=opt, metrics=["mae"])
    return m
