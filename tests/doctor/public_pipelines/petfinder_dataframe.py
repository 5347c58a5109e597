"""PetFinder mini from a pandas DataFrame, sliced per example from a dict of columns.

Source: tensorflow/docs site/en/tutorials/structured_data/preprocessing_layers.ipynb
("Classify structured data using Keras preprocessing layers": pd.read_csv, target from
AdoptionSpeed, drop Description, an unseeded 80/10/10 split; df_to_dataset:
from_tensor_slices((dict of columns as (n, 1) arrays, labels)), shuffle(len(dataframe)),
batch, prefetch(batch_size); Normalization, IntegerLookup and StringLookup + CategoryEncoding
per column, Dense(32), Dropout, Dense(1) from logits). pandas is not installed here:
_shared.read_csv types the columns as pandas does (int64, float64, object strings).

Flaw: a shuffle and batch over 16 separate columns one example at a time (every example is
16 small tensors); pandas' int64/float64/object columns as they are; note the tutorial's
df_to_dataset reads `dataframe`, not `df`, so the label column 'target' is also a feature.
Twin: shuffle row indices, batch them, gather each batch from the columns in a parallel map
(the same dict, the same dtypes), prefetch.
Compared: one epoch of the same training split (made once per folder: the tutorial splits
the DataFrame before building the dataset), ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, read_csv

SOURCE = (
    "tensorflow/docs site/en/tutorials/structured_data/preprocessing_layers.ipynb "
    "(Classify structured data using Keras preprocessing layers)"
)
FORMAT = "CSV read into a DataFrame (int64, float64 and string columns)"
FLAW = "from_tensor_slices of a 16-column dict: shuffle and batch per example"
TWIN = "shuffle indices, batch, gather per batch, prefetch"
BATCH_SIZE = 256
STRINGS = {
    "Type": ["Cat", "Dog"],
    "Breed1": ["Tabby", "Domestic Short Hair", "Mixed Breed", "Siamese"],
    "Gender": ["Male", "Female"],
    "Color1": ["Black", "Brown", "White", "Golden"],
    "Color2": ["No Color", "White", "Brown", "Cream"],
    "MaturitySize": ["Small", "Medium", "Large"],
    "FurLength": ["Short", "Medium", "Long"],
    "Vaccinated": ["No", "Yes", "Not Sure"],
    "Sterilized": ["No", "Yes", "Not Sure"],
    "Health": ["Healthy", "Minor Injury"],
}
_SPLITS: dict[str, dict[str, np.ndarray]] = {}


# petfinder-mini.csv's rows.
FULL = 11537


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(9)
    names = ["Type", "Age", "Breed1", "Gender", "Color1", "Color2", "MaturitySize"]
    names += ["FurLength", "Vaccinated", "Sterilized", "Health", "Fee", "Description"]
    names += ["PhotoAmt", "AdoptionSpeed"]
    folder = Path(dir) / "datasets" / "petfinder-mini"
    folder.mkdir(parents=True)
    lines = [",".join(names)]
    for _ in range(count(size, 1200, FULL)):
        row = {k: str(rng.choice(v)) for k, v in STRINGS.items()}
        row.update(
            Age=str(rng.integers(1, 60)),
            Fee=str(rng.choice([0, 0, 50, 100])),
            Description=f"a nice pet number {rng.integers(1000)}",
            PhotoAmt=str(float(rng.integers(0, 8))),
            AdoptionSpeed=str(rng.integers(0, 5)),
        )
        lines.append(",".join(row[n] for n in names))
    (folder / "petfinder-mini.csv").write_text("\n".join(lines) + "\n")


def _train(dir: str) -> dict[str, np.ndarray]:
    """The tutorial's DataFrame steps up to `train` (once per folder: the split is random)."""
    if dir not in _SPLITS:
        dataframe = read_csv(Path(dir) / "datasets" / "petfinder-mini" / "petfinder-mini.csv")
        dataframe["target"] = np.where(dataframe["AdoptionSpeed"] == 4, 0, 1)
        for dropped in ("AdoptionSpeed", "Description"):
            dataframe.pop(dropped)
        order = np.random.permutation(len(dataframe["target"]))  # dataframe.sample(frac=1)
        train = order[: int(0.8 * len(order))]
        _SPLITS[dir] = {k: v[train] for k, v in dataframe.items()}
    return _SPLITS[dir]


def original(dir: str, batch_size: int = BATCH_SIZE, shuffle: bool = True) -> tf.data.Dataset:
    dataframe = _train(dir)
    df = dict(dataframe)
    labels = df.pop("target")
    df = {key: value[:, tf.newaxis] for key, value in dataframe.items()}
    ds = tf.data.Dataset.from_tensor_slices((dict(df), labels))
    if shuffle:
        ds = ds.shuffle(buffer_size=len(labels))
    ds = ds.batch(batch_size)
    ds = ds.prefetch(batch_size)
    return ds


def tuned(dir: str, batch_size: int = BATCH_SIZE, shuffle: bool = True) -> tf.data.Dataset:
    dataframe = _train(dir)
    columns = {
        k: tf.constant(v.astype(str) if v.dtype == object else v)[:, tf.newaxis]
        for k, v in dataframe.items()
    }
    labels = tf.constant(dataframe["target"])
    n = len(dataframe["target"])

    def gather(idx):
        return {k: tf.gather(v, idx) for k, v in columns.items()}, tf.gather(labels, idx)

    ds = tf.data.Dataset.range(n)
    if shuffle:
        ds = ds.shuffle(n)
    ds = ds.batch(batch_size).map(gather, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    layers = keras.layers
    all_inputs, encoded = {}, []
    # Normalization.adapt on the training split in the tutorial: the stand-in's statistics.
    for header, mean, var in (("PhotoAmt", 3.5, 5.25), ("Fee", 37.5, 1650.0)):
        numeric_col = keras.Input(shape=(1,), name=header)
        all_inputs[header] = numeric_col
        encoded.append(layers.Normalization(axis=None, mean=mean, variance=var)(numeric_col))
    age_col = keras.Input(shape=(1,), name="Age", dtype="int64")
    age_index = layers.IntegerLookup(vocabulary=[1, 2, 3, 4], max_tokens=5)
    all_inputs["Age"] = age_col
    encoded.append(layers.CategoryEncoding(num_tokens=5)(age_index(age_col)))
    for header, vocab in STRINGS.items():
        col = keras.Input(shape=(1,), name=header, dtype="string")
        index = layers.StringLookup(vocabulary=vocab[:4], max_tokens=5)
        all_inputs[header] = col
        encoded.append(layers.CategoryEncoding(num_tokens=index.vocabulary_size())(index(col)))
    x = layers.concatenate(encoded)
    x = layers.Dense(32, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    m = keras.Model(all_inputs, layers.Dense(1)(x))
    m.compile(
        optimizer="adam",
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m
