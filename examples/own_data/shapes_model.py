"""The image-folder example's model: `model.name: shapes_model:make_model`. tfperf feeds
it {"image": uint8 batch (batch, 32, 32, 3)}; the label (the class subfolder's index) is
taken out as data.label."""

from __future__ import annotations

import keras


def make_model() -> keras.Model:
    image = keras.Input(shape=(32, 32, 3), name="image", dtype="uint8")
    x = keras.layers.Rescaling(1 / 255)(image)
    x = keras.layers.Conv2D(8, 3, activation="relu")(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(16, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(2, activation="softmax")(x)  # circle, square
    return keras.Model({"image": image}, outputs)
