"""Freesound WAV clips into framed log-mel spectrogram examples, as the DCASE 2018 baseline reads.

Source: DCASE-REPO/dcase2018_baseline task2/inputs.py and task2/main.py (train_input:
TextLineDataset(train.csv), skip(1), shuffle(10000), map(record_to_labeled_log_mel_examples,
num_parallel_calls=4): decode_csv of the line, read_file + decode_wav of the clip (44.1
kHz), stft (25 ms window, 10 ms hop, fft 2048), magnitude, linear_to_mel_weight_matrix (64
bands, 125-7500 Hz) matmul, log(mel + 0.001), frame into 0.25 s examples every 0.125 s,
label looked up in a HashTable from class_map.csv, one-hot and tiled per example; unbatch,
shuffle(20000), repeat(100), batch_and_drop_remainder(64), prefetch(10); hparams from
main.py's parse_hparams). Ported to TF 2 (tf.contrib.signal -> tf.signal, HashTable ->
tf.lookup.StaticHashTable, unbatch and batch(drop_remainder=True) as methods).

Flaw: every epoch of the 100 decodes every clip and recomputes its spectrogram (the same
examples each time); the clip map's parallelism is fixed at 4.
Twin: the clips' log-mel examples computed once in a parallel map and cached, the clips
shuffled after the cache, then the same unbatch, shuffle, repeat and batch; prefetch.
Compared: one epoch (epochs=1) without dropping the last partial batch, ignoring order.
"""

from __future__ import annotations

import wave
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count

SOURCE = "DCASE-REPO/dcase2018_baseline task2/inputs.py (DCASE 2018 task 2, log-mel input)"
FORMAT = "WAV clips (44.1 kHz, variable length) listed in a CSV"
KIND = "spectrogram"
FLAW = "decode + stft + log-mel of every clip again in each of 100 epochs; map of 4"
TWIN = "log-mel examples per clip cached, clips shuffled after the cache, prefetch"
BATCH_SIZE = 64
SAME_KWARGS = {"epochs": 1, "drop_remainder": False}
# FSDKaggle2018's 9,473 training clips (0.3 to 30 s, 6.6 s on average: 5.5 GB of WAV);
# "full" writes 9,473 clips of 0.5 to 5 s (about 2.3 GB) to keep the writing short.
FULL = 9_473
SAMPLE_RATE = 44100
NUM_CLASSES = 41
HPARAMS = dict(
    stft_window_seconds=0.025,
    stft_hop_seconds=0.010,
    mel_bands=64,
    mel_min_hz=125,
    mel_max_hz=7500,
    mel_log_offset=0.001,
    example_window_seconds=0.250,
    example_hop_seconds=0.125,
    batch_size=64,
)


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 24, FULL)
    rng = np.random.default_rng(26)
    clips = Path(dir) / "audio_train"
    clips.mkdir(parents=True, exist_ok=True)
    labels = [f"Label_{c:02d}" for c in range(NUM_CLASSES)]
    (Path(dir) / "class_map.csv").write_text(
        "".join(f"{i},{name}\n" for i, name in enumerate(labels))
    )
    lines = ["fname,label,manually_verified"]
    low, high = (0.5, 5.0) if size == "full" else (0.3, 2.0)
    for i in range(n):
        c = int(rng.integers(0, NUM_CLASSES))
        samples = int(rng.uniform(low, high) * SAMPLE_RATE)
        t = np.arange(samples) / SAMPLE_RATE
        wave_ = 0.3 * np.sin(2 * np.pi * (220 + 40 * c) * t) + 0.05 * rng.standard_normal(samples)
        name = f"{i:08x}.wav"
        with wave.open(str(clips / name), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes((np.clip(wave_, -1, 1) * 32767).astype("<i2").tobytes())
        lines.append(f"{name},{labels[c]},{int(rng.integers(0, 2))}")
    (Path(dir) / "train.csv").write_text("\n".join(lines) + "\n")


class _HParams(dict):
    __getattr__ = dict.__getitem__


# ---- task2/inputs.py ------------------------------------------------------------------------
def clip_to_waveform(clip, clip_dir=None):
    clip_path = tf.strings.join([clip_dir, clip], separator="/")
    clip_data = tf.io.read_file(clip_path)
    waveform, sr = tf.audio.decode_wav(clip_data)
    check_sr = tf.debugging.assert_equal(sr, SAMPLE_RATE)
    check_channels = tf.debugging.assert_equal(tf.shape(waveform)[1], 1)
    with tf.control_dependencies([tf.group(check_sr, check_channels)]):
        return tf.squeeze(waveform)


def clip_to_log_mel_examples(clip, clip_dir=None, hparams=None):
    waveform = clip_to_waveform(clip, clip_dir=clip_dir)
    window_length_samples = int(round(SAMPLE_RATE * hparams.stft_window_seconds))
    hop_length_samples = int(round(SAMPLE_RATE * hparams.stft_hop_seconds))
    fft_length = 2 ** int(np.ceil(np.log(window_length_samples) / np.log(2.0)))
    magnitude_spectrogram = tf.abs(
        tf.signal.stft(
            signals=waveform,
            frame_length=window_length_samples,
            frame_step=hop_length_samples,
            fft_length=fft_length,
        )
    )
    num_spectrogram_bins = fft_length // 2 + 1
    linear_to_mel_weight_matrix = tf.signal.linear_to_mel_weight_matrix(
        num_mel_bins=hparams.mel_bands,
        num_spectrogram_bins=num_spectrogram_bins,
        sample_rate=SAMPLE_RATE,
        lower_edge_hertz=hparams.mel_min_hz,
        upper_edge_hertz=hparams.mel_max_hz,
    )
    mel_spectrogram = tf.matmul(magnitude_spectrogram, linear_to_mel_weight_matrix)
    log_mel_spectrogram = tf.math.log(mel_spectrogram + hparams.mel_log_offset)
    spectrogram_sr = 1 / hparams.stft_hop_seconds
    example_window_length_samples = int(round(spectrogram_sr * hparams.example_window_seconds))
    example_hop_length_samples = int(round(spectrogram_sr * hparams.example_hop_seconds))
    return tf.signal.frame(
        signal=log_mel_spectrogram,
        frame_length=example_window_length_samples,
        frame_step=example_hop_length_samples,
        axis=0,
    )


def record_to_labeled_log_mel_examples(
    csv_record, clip_dir=None, hparams=None, label_class_index_table=None, num_classes=None
):
    [clip, label, _] = tf.io.decode_csv(csv_record, record_defaults=[[""], [""], [0]])
    features = clip_to_log_mel_examples(clip, clip_dir=clip_dir, hparams=hparams)
    class_index = label_class_index_table.lookup(label)
    label_onehot = tf.one_hot(class_index, num_classes)
    num_examples = tf.shape(features)[0]
    labels = tf.tile([label_onehot], [num_examples, 1])
    return features, labels


def get_class_map(class_map_path):
    label_class_index_table = tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(
            filename=class_map_path,
            key_dtype=tf.string,
            key_index=1,
            value_dtype=tf.int32,
            value_index=0,
            delimiter=",",
        ),
        default_value=-1,
    )
    num_classes = len(open(class_map_path).readlines())
    return label_class_index_table, num_classes


def original(
    dir: str, batch_size: int = BATCH_SIZE, epochs: int = 100, drop_remainder: bool = True
) -> tf.data.Dataset:
    hparams = _HParams(HPARAMS, batch_size=batch_size)
    table, num_classes = get_class_map(str(Path(dir) / "class_map.csv"))
    dataset = tf.data.TextLineDataset(str(Path(dir) / "train.csv"))
    dataset = dataset.skip(1)
    dataset = dataset.shuffle(buffer_size=10000)
    dataset = dataset.map(
        map_func=lambda line: record_to_labeled_log_mel_examples(
            line,
            clip_dir=str(Path(dir) / "audio_train"),
            hparams=hparams,
            label_class_index_table=table,
            num_classes=num_classes,
        ),
        num_parallel_calls=4,
    )
    dataset = dataset.unbatch()
    dataset = dataset.shuffle(buffer_size=20000)
    dataset = dataset.repeat(epochs)
    dataset = dataset.batch(hparams.batch_size, drop_remainder=drop_remainder)
    return dataset.prefetch(10)


# ---- the hand-tuned twin --------------------------------------------------------------------
def tuned(
    dir: str, batch_size: int = BATCH_SIZE, epochs: int = 100, drop_remainder: bool = True
) -> tf.data.Dataset:
    hparams = _HParams(HPARAMS, batch_size=batch_size)
    table, num_classes = get_class_map(str(Path(dir) / "class_map.csv"))
    clip_dir = str(Path(dir) / "audio_train")
    ds = tf.data.TextLineDataset(str(Path(dir) / "train.csv")).skip(1)
    ds = ds.map(
        lambda line: record_to_labeled_log_mel_examples(
            line, clip_dir, hparams, table, num_classes
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    ds = ds.cache().shuffle(10000).unbatch().shuffle(20000).repeat(epochs)
    return ds.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """task2/model.py's define_cnn in Keras (conv 100 7x7, max pool 3x3/2, conv 150 5x5,
    max pool, conv 200 3x3, global max, softmax over the 41 classes), Adam."""
    inputs = keras.Input(shape=(25, 64))
    x = keras.layers.Reshape((25, 64, 1))(inputs)
    x = keras.layers.Conv2D(100, 7, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = keras.layers.Conv2D(150, 5, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = keras.layers.Conv2D(200, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalMaxPooling2D()(x)
    m = keras.Model(inputs, keras.layers.Dense(NUM_CLASSES)(x))
    m.compile(optimizer="adam", loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    return m
