"""`tfperf train` on the datasets Keras' own utilities make, as tutorials write them:
image_dataset_from_directory (images resized, integer labels), text_dataset_from_directory
(string batches into TextVectorization), make_csv_dataset (a dict of columns, strings among
them, into StringLookup), from_tensor_slices of a dict with a string column, and one-hot
labels with categorical_crossentropy. Each trains a few steps to a finite loss, as
`model.fit` would."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import tensorflow as tf
import yaml

from tfperf.config import load_config
from tfperf.train.loop import train

USER_CODE = """
import os

import keras
import tensorflow as tf

HERE = os.path.dirname(__file__)


def images(training=True, batch_size=8):
    return keras.utils.image_dataset_from_directory(
        os.path.join(HERE, "images"), image_size=(24, 24), batch_size=8, seed=1
    )


def small_cnn():
    x = keras.Input((24, 24, 3))
    h = keras.layers.Rescaling(1 / 255)(x)
    h = keras.layers.Conv2D(4, 3, activation="relu")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(x, keras.layers.Dense(3)(h))


def texts(training=True, batch_size=8):
    return keras.utils.text_dataset_from_directory(
        os.path.join(HERE, "texts"), batch_size=8, seed=1
    )


def bag_of_words():
    vectorize = keras.layers.TextVectorization(
        output_mode="multi_hot", vocabulary=["good", "bad", "film", "plot", "great"]
    )
    x = keras.Input((), dtype="string")
    return keras.Model(x, keras.layers.Dense(1)(vectorize(x)))


def csv_rows(training=True, batch_size=8):
    return tf.data.experimental.make_csv_dataset(
        os.path.join(HERE, "rows.csv"), batch_size=8, label_name="label", num_epochs=1,
        shuffle=training,
    )


def tabular():
    city = keras.Input((), dtype="string", name="city")
    size = keras.Input((), name="size")
    onehot = keras.layers.StringLookup(vocabulary=["paris", "oslo", "rome"], output_mode="one_hot")
    h = keras.layers.Concatenate()([onehot(city), keras.layers.Reshape((1,))(size)])
    return keras.Model({"city": city, "size": size}, keras.layers.Dense(1, "sigmoid")(h))


def string_slices(training=True, batch_size=8):
    cities = tf.constant(["paris", "oslo", "rome", "oslo"] * 8)
    sizes = tf.range(32, dtype=tf.float32) / 32
    labels = tf.cast(sizes > 0.5, tf.float32)
    ds = tf.data.Dataset.from_tensor_slices(({"city": cities, "size": sizes}, labels))
    return ds.shuffle(32).batch(batch_size)


def one_hot(training=True, batch_size=8):
    x = tf.random.stateless_normal((32, 4), seed=(1, 2))
    y = tf.one_hot(tf.range(32) % 3, 3)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size)


def dense_softmax():
    x = keras.Input((4,))
    return keras.Model(x, keras.layers.Dense(3, activation="softmax")(x))
"""


def write_data(tmp_path) -> None:
    rng = np.random.default_rng(0)
    for c, name in enumerate(["cat", "dog", "fox"]):
        (tmp_path / "images" / name).mkdir(parents=True)
        for i in range(6):  # images of varied sizes: the utility resizes them
            pixels = rng.integers(0, 255, size=(20 + 4 * i, 30, 3), dtype=np.uint8)
            png = tf.io.encode_png(pixels).numpy()
            (tmp_path / "images" / name / f"{c}_{i}.png").write_bytes(png)
    for name, words in [("neg", "bad plot"), ("pos", "great film")]:
        (tmp_path / "texts" / name).mkdir(parents=True)
        for i in range(8):
            (tmp_path / "texts" / name / f"{i}.txt").write_text(f"a {words} number {i}\n")
    rows = ["city,size,label"] + [
        f"{['paris', 'oslo', 'rome'][i % 3]},{i / 40:.3f},{int(i % 2)}" for i in range(40)
    ]
    (tmp_path / "rows.csv").write_text("\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    path = tmp_path_factory.mktemp("keras_utilities")
    write_data(path)
    module = f"utilities_{uuid.uuid4().hex[:8]}"  # unique: sys.modules caches by name
    (path / f"{module}.py").write_text(USER_CODE)
    return path, module


CASES = {
    "image_dataset_from_directory": (
        "images",
        "small_cnn",
        "sparse_categorical_crossentropy_from_logits",
    ),
    "text_dataset_from_directory": ("texts", "bag_of_words", "binary_crossentropy_from_logits"),
    "make_csv_dataset": ("csv_rows", "tabular", "binary_crossentropy"),
    "from_tensor_slices_dict_strings": ("string_slices", "tabular", "binary_crossentropy"),
    "one_hot_labels": ("one_hot", "dense_softmax", "categorical_crossentropy"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_keras_utility_pipelines_train(home, tmp_path, case):
    path, module = home
    pipeline, model, loss = CASES[case]
    doc = {
        "data": {"pipeline": f"{module}:{pipeline}"},
        "model": {"name": f"{module}:{model}", "loss": loss, "metrics": ["accuracy"]},
        "pipeline": {"batch_size": 8},
        "train": {"out_dir": str(tmp_path / "run"), "max_steps": 4, "monitor_system": False},
    }
    (path / f"{case}.yaml").write_text(yaml.safe_dump(doc))
    result = train(load_config(str(path / f"{case}.yaml")), progress=False)
    assert result.steps == 4
    assert np.isfinite(result.final_loss), result.final_loss
    assert 0.0 <= result.metrics["metrics/accuracy"] <= 1.0, result.metrics
