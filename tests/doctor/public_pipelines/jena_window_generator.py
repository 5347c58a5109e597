"""Jena climate windows from the time-series tutorial's WindowGenerator.

Source: tensorflow/docs site/en/tutorials/structured_data/time_series.ipynb ("Time series
forecasting": the CSV read with pandas, every 6th row (hourly), wind speed fixed, wind
vector and day/year signals added, 70% train, normalized with the training mean and std;
WindowGenerator(input_width=24, label_width=24, shift=1, label_columns=['T (degC)']);
make_dataset: np.array(data, dtype=np.float32), timeseries_dataset_from_array(data,
targets=None, sequence_length=total_window_size, sequence_stride=1, shuffle=True,
batch_size=32), map(split_window) with set_shape([None, input_width, None]); lstm_model =
Sequential([LSTM(32, return_sequences=True), Dense(units=1)]), MSE). pandas is not
installed here: the same steps in numpy.

Flaw: timeseries_dataset_from_array cuts each window with its own gather; split_window
maps each batch sequentially; no prefetch. The inputs' static shape is (None, 24, None):
the feature axis is unknown, so a model check on zeros built from it cannot work.
Twin: window starts shuffled and batched, one gather per batch and the split in a parallel
map (same static shapes), prefetch.
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, read_csv

SOURCE = (
    "tensorflow/docs site/en/tutorials/structured_data/time_series.ipynb (Time series forecasting)"
)
FORMAT = "CSV of 10-minute weather readings, as a time series"
FLAW = "timeseries_dataset_from_array: a gather per window; sequential split map"
TWIN = "shuffled window starts batched, one gather + split per batch, prefetch"
BATCH_SIZE = 32
COLUMNS = ["p (mbar)", "T (degC)", "Tpot (K)", "Tdew (degC)", "rh (%)", "VPmax (mbar)"]
COLUMNS += ["VPact (mbar)", "VPdef (mbar)", "sh (g/kg)", "H2OC (mmol/mol)"]
COLUMNS += ["rho (g/m**3)", "wv (m/s)", "max. wv (m/s)", "wd (deg)"]


# jena_climate_2009_2016.csv's 420,551 rows (every 10 minutes, 2009-2016).
FULL = 420_551


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(16)
    t0 = datetime.datetime(2009, 1, 1, 0, 10)
    lines = ["Date Time," + ",".join(COLUMNS)]
    for i in range(count(size, 6 * 700, FULL)):
        when = t0 + datetime.timedelta(minutes=10 * i)
        values = rng.normal(10, 3, len(COLUMNS))
        values[-3:] = [abs(values[-3]), abs(values[-2]), rng.uniform(0, 360)]
        if i % 997 == 0:
            values[-3] = -9999.0  # the dataset's bad wind readings
        lines.append(
            when.strftime("%d.%m.%Y %H:%M:%S") + "," + ",".join(f"{v:.2f}" for v in values)
        )
    (Path(dir) / "jena_climate_2009_2016.csv").write_text("\n".join(lines) + "\n")


def train_df(dir: str) -> tuple[np.ndarray, list[str]]:
    """The tutorial's normalized train_df (float64) and its column names."""
    df = read_csv(Path(dir) / "jena_climate_2009_2016.csv")
    df = {k: v[5::6] for k, v in df.items()}
    date_time = [datetime.datetime.strptime(d, "%d.%m.%Y %H:%M:%S") for d in df.pop("Date Time")]
    wv = df["wv (m/s)"]
    wv[wv == -9999.0] = 0.0
    max_wv = df["max. wv (m/s)"]
    max_wv[max_wv == -9999.0] = 0.0
    wv = df.pop("wv (m/s)")
    max_wv = df.pop("max. wv (m/s)")
    wd_rad = df.pop("wd (deg)") * np.pi / 180
    df["Wx"], df["Wy"] = wv * np.cos(wd_rad), wv * np.sin(wd_rad)
    df["max Wx"], df["max Wy"] = max_wv * np.cos(wd_rad), max_wv * np.sin(wd_rad)
    timestamp_s = np.array([d.replace(tzinfo=datetime.UTC).timestamp() for d in date_time])
    day = 24 * 60 * 60
    year = (365.2425) * day
    df["Day sin"] = np.sin(timestamp_s * (2 * np.pi / day))
    df["Day cos"] = np.cos(timestamp_s * (2 * np.pi / day))
    df["Year sin"] = np.sin(timestamp_s * (2 * np.pi / year))
    df["Year cos"] = np.cos(timestamp_s * (2 * np.pi / year))
    names = list(df)
    data = np.column_stack([df[k] for k in names])
    train = data[0 : int(len(data) * 0.7)]
    return (train - train.mean(axis=0)) / train.std(axis=0, ddof=1), names


class WindowGenerator:
    def __init__(self, input_width, label_width, shift, train_df, column_names, label_columns):
        self.train_df = train_df
        self.label_columns = label_columns
        self.column_indices = {name: i for i, name in enumerate(column_names)}
        self.input_width = input_width
        self.label_width = label_width
        self.shift = shift
        self.total_window_size = input_width + shift
        self.input_slice = slice(0, input_width)
        self.label_start = self.total_window_size - self.label_width
        self.labels_slice = slice(self.label_start, None)

    def split_window(self, features):
        inputs = features[:, self.input_slice, :]
        labels = features[:, self.labels_slice, :]
        if self.label_columns is not None:
            labels = tf.stack(
                [labels[:, :, self.column_indices[name]] for name in self.label_columns],
                axis=-1,
            )
        inputs.set_shape([None, self.input_width, None])
        labels.set_shape([None, self.label_width, None])
        return inputs, labels

    def make_dataset(self, data, batch_size=32):
        data = np.array(data, dtype=np.float32)
        ds = keras.utils.timeseries_dataset_from_array(
            data=data,
            targets=None,
            sequence_length=self.total_window_size,
            sequence_stride=1,
            shuffle=True,
            batch_size=batch_size,
        )
        ds = ds.map(self.split_window)
        return ds


def _window(dir: str) -> WindowGenerator:
    data, names = train_df(dir)
    return WindowGenerator(24, 24, 1, data, names, label_columns=["T (degC)"])


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    wide_window = _window(dir)
    return wide_window.make_dataset(wide_window.train_df, batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    w = _window(dir)
    series = tf.constant(w.train_df, tf.float32)
    starts = len(w.train_df) - w.total_window_size + 1

    def windows(start):
        idx = start[:, None] + tf.range(w.total_window_size, dtype=start.dtype)[None, :]
        return w.split_window(tf.gather(series, idx))

    ds = tf.data.Dataset.range(starts).shuffle(starts).batch(batch_size)
    return ds.map(windows, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    lstm_model = keras.models.Sequential(
        [keras.layers.LSTM(32, return_sequences=True), keras.layers.Dense(units=1)]
    )
    lstm_model.compile(
        loss=keras.losses.MeanSquaredError(),
        optimizer=keras.optimizers.Adam(),
        metrics=[keras.metrics.MeanAbsoluteError()],
    )
    return lstm_model
