"""Mini Speech Commands WAV files decoded and turned into spectrograms one clip at a time.

Source: tensorflow/docs site/en/tutorials/audio/simple_audio.ipynb at commit 563659de0
(2021, "Simple audio recognition": filenames = glob + tf.random.shuffle, train_files =
filenames[:6400], from_tensor_slices(files), map(get_waveform_and_label,
num_parallel_calls=AUTOTUNE) (read_file, decode_wav, squeeze; label from the path),
map(get_spectrogram_and_label_id, num_parallel_calls=AUTOTUNE) (pad to 16,000 samples,
tf.signal.stft, abs, channel axis; argmax(label == commands)), batch(64),
cache().prefetch(AUTOTUNE); Resizing(32, 32), Normalization, two Conv2D, Dense(num_labels)).

Flaw: one STFT per clip (the kernel takes a batch), two per-example maps, labels by string
comparison per clip; the cache after the batch fixes the batches for every epoch.
Twin: read, decode and pad per clip in one parallel map, batch, one STFT per batch in a
parallel map, cache, prefetch.
Compared: with train_fraction=1 (the unseeded tf.random.shuffle before the split would hand
each pipeline different files), one epoch, ignoring order.
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from ._shared import count

SOURCE = (
    "tensorflow/docs site/en/tutorials/audio/simple_audio.ipynb "
    "(Simple audio recognition, 2021 version)"
)
FORMAT = "WAV files (16 kHz mono) in class folders"
FLAW = "per-clip decode + per-clip STFT in two maps, cache after batch"
TWIN = "parallel per-clip decode+pad, batch, one STFT per batch, cache, prefetch"
BATCH_SIZE = 64
SAME_KWARGS = {"train_fraction": 1.0}
COMMANDS = ["down", "go", "left", "no", "right", "stop", "up", "yes"]
AUTOTUNE = tf.data.AUTOTUNE


# mini_speech_commands' clips (1,000 per command).
FULL = 8000


def make_data(dir: str, size: str = "small") -> None:
    rng = np.random.default_rng(12)
    data_dir = Path(dir) / "data" / "mini_speech_commands"
    for c, command in enumerate(COMMANDS):
        (data_dir / command).mkdir(parents=True)
        for i in range(count(size, 6, FULL // len(COMMANDS))):
            n = 16000 if i % 3 else int(rng.integers(9000, 16000))  # some clips are short
            t = np.arange(n) / 16000
            wave = 0.3 * np.sin(2 * np.pi * (200 + 60 * c) * t) + 0.05 * rng.standard_normal(n)
            wav = tf.audio.encode_wav(wave.astype(np.float32)[:, None], 16000).numpy()
            (data_dir / command / f"{c:02d}{i:02d}_nohash_0.wav").write_bytes(wav)


def _commands(dir: str) -> np.ndarray:
    data_dir = Path(dir) / "data" / "mini_speech_commands"
    commands = np.array(tf.io.gfile.listdir(str(data_dir)))
    return commands[commands != "README.md"]


def _train_files(dir: str, train_fraction: float) -> tf.Tensor:
    data_dir = Path(dir) / "data" / "mini_speech_commands"
    filenames = tf.io.gfile.glob(str(data_dir) + "/*/*")
    filenames = tf.random.shuffle(filenames)
    return filenames[: int(len(filenames) * train_fraction)]


def decode_audio(audio_binary):
    audio, _ = tf.audio.decode_wav(contents=audio_binary)
    return tf.squeeze(audio, axis=-1)


def get_label(file_path):
    parts = tf.strings.split(input=file_path, sep=os.path.sep)
    return parts[-2]


def get_waveform_and_label(file_path):
    label = get_label(file_path)
    audio_binary = tf.io.read_file(file_path)
    waveform = decode_audio(audio_binary)
    return waveform, label


def get_spectrogram(waveform):
    input_len = 16000
    waveform = waveform[:input_len]
    zero_padding = tf.zeros([16000] - tf.shape(waveform), dtype=tf.float32)
    waveform = tf.cast(waveform, dtype=tf.float32)
    equal_length = tf.concat([waveform, zero_padding], 0)
    spectrogram = tf.signal.stft(equal_length, frame_length=255, frame_step=128)
    spectrogram = tf.abs(spectrogram)
    spectrogram = spectrogram[..., tf.newaxis]
    return spectrogram


def original(dir: str, batch_size: int = BATCH_SIZE, train_fraction: float = 0.8):
    commands = _commands(dir)
    train_files = _train_files(dir, train_fraction)

    def get_spectrogram_and_label_id(audio, label):
        spectrogram = get_spectrogram(audio)
        label_id = tf.math.argmax(label == commands)
        return spectrogram, label_id

    files_ds = tf.data.Dataset.from_tensor_slices(train_files)
    waveform_ds = files_ds.map(map_func=get_waveform_and_label, num_parallel_calls=AUTOTUNE)
    spectrogram_ds = waveform_ds.map(
        map_func=get_spectrogram_and_label_id, num_parallel_calls=AUTOTUNE
    )
    train_ds = spectrogram_ds
    train_ds = train_ds.batch(batch_size)
    train_ds = train_ds.cache().prefetch(AUTOTUNE)
    return train_ds


def tuned(dir: str, batch_size: int = BATCH_SIZE, train_fraction: float = 0.8):
    commands = tf.constant(_commands(dir))

    def load(file_path):
        waveform = decode_audio(tf.io.read_file(file_path))[:16000]
        waveform = tf.pad(waveform, [[0, 16000 - tf.shape(waveform)[0]]])
        label_id = tf.argmax(get_label(file_path) == commands)
        return tf.ensure_shape(waveform, [16000]), label_id

    def spectrograms(waveforms, labels):
        spec = tf.abs(tf.signal.stft(waveforms, frame_length=255, frame_step=128))
        return spec[..., tf.newaxis], labels

    ds = tf.data.Dataset.from_tensor_slices(_train_files(dir, train_fraction))
    ds = ds.map(load, num_parallel_calls=AUTOTUNE).batch(batch_size)
    return ds.map(spectrograms, num_parallel_calls=AUTOTUNE).cache().prefetch(AUTOTUNE)


def model() -> keras.Model:
    # norm_layer.adapt(spectrograms) in the tutorial: fixed statistics here.
    m = keras.Sequential(
        [
            layers.Input(shape=(124, 129, 1)),
            layers.Resizing(32, 32),
            layers.Normalization(mean=0.5, variance=4.0),
            layers.Conv2D(8, 3, activation="relu"),
            layers.Conv2D(16, 3, activation="relu"),
            layers.MaxPooling2D(),
            layers.Dropout(0.25),
            layers.Flatten(),
            layers.Dense(32, activation="relu"),
            layers.Dropout(0.5),
            layers.Dense(len(COMMANDS)),
        ]
    )
    m.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return m
