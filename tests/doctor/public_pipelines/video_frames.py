"""UCF101-style videos read frame by frame in a Python generator (from_generator).

Source: tensorflow/docs site/en/tutorials/video/video_classification.ipynb ("Video
classification with a 3D convolutional neural network": frames_from_video_file (read
frames with OpenCV, a random start when the video is long enough, every 15th frame,
format_frames = convert_image_dtype + resize_with_pad to 224x224 per frame, BGR to RGB),
class FrameGenerator yielding (frames, label) with random.shuffle of the files when
training; tf.data.Dataset.from_generator(FrameGenerator(path, n_frames=10, training=True),
output_signature=(TensorSpec((None, None, None, 3), float32), TensorSpec((), int16))),
batch(8); a (2+1)D CNN). OpenCV is not installed here: the stand-in videos are animated
GIFs read frame by frame with PIL in the generator, frames turned BGR as cv2 gives them.

Flaw: a Python generator (the GIL, one video at a time, frames converted and resized per
frame in eager TensorFlow), batch without prefetch; the frames' static shape is unknown
(None, None, None, 3), so a model check on zeros cannot run.
Twin: the file list in tf.data, tf.io.decode_gif of each video, the 10 frames gathered,
missing ones zero, one resize_with_pad per video, in a parallel map; batch; prefetch.
Compared: one epoch, ignoring order (the stand-in videos are shorter than the 136 frames a
random start needs, so both start at frame 0, as the tutorial does for short videos).
"""

from __future__ import annotations

import random
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, picture

SOURCE = (
    "tensorflow/docs site/en/tutorials/video/video_classification.ipynb "
    "(Video classification with a 3D convolutional neural network)"
)
FORMAT = "video files (animated GIF frames) through a Python generator"
FLAW = "from_generator: Python frame reading and per-frame resize, no prefetch"
TWIN = "decode_gif + gather frames + resize per video in a parallel map, prefetch"
BATCH_SIZE = 8
CLASSES = ["ApplyEyeMakeup", "Archery", "Basketball", "Biking"]
n_frames = 10
output_size = (224, 224)
frame_step = 15


# UCF101_subset's 300 training videos (10 classes of 30; here 4 classes of 75), about 150
# frames each (320x240 in the original, 120x160 GIF frames here, a class's videos cycling
# over 3 encoded ones, to keep the writing short).
FULL = 300


def make_data(dir: str, size: str = "small") -> None:
    from PIL import Image

    rng = np.random.default_rng(15)
    n_frames, h, w = (30, 60, 80) if size == "small" else (150, 120, 160)
    for c, name in enumerate(CLASSES):
        folder = Path(dir) / "train" / name
        folder.mkdir(parents=True)
        for v in range(count(size, 2, FULL // len(CLASSES))):
            path = folder / f"v_{name}_g0{v}_c01.gif"
            if size == "full" and v >= 3:  # a class's videos cycle over 3 encoded ones
                path.write_bytes((folder / f"v_{name}_g0{v % 3}_c01.gif").read_bytes())
                continue
            frames = [Image.fromarray(picture(rng, h, w, tint=c + t)) for t in range(n_frames)]
            frames[0].save(path, save_all=True, append_images=frames[1:])


def format_frames(frame, output_size):
    frame = tf.image.convert_image_dtype(frame, tf.float32)
    frame = tf.image.resize_with_pad(frame, *output_size)
    return frame


class VideoCapture:
    """The few cv2.VideoCapture calls the tutorial makes, on a GIF (frames BGR, as cv2)."""

    def __init__(self, path: str):
        from PIL import Image

        self.image = Image.open(path)
        self.pos = 0

    def get_frame_count(self) -> int:
        return self.image.n_frames

    def set_pos(self, pos: int) -> None:
        self.pos = pos

    def read(self):
        if self.pos >= self.image.n_frames:
            return False, None
        self.image.seek(self.pos)
        self.pos += 1
        return True, np.asarray(self.image.convert("RGB"))[..., ::-1]

    def release(self) -> None:
        self.image.close()


def frames_from_video_file(video_path, n_frames, output_size=(224, 224), frame_step=15):
    result = []
    src = VideoCapture(str(video_path))
    video_length = src.get_frame_count()
    need_length = 1 + (n_frames - 1) * frame_step
    if need_length > video_length:
        start = 0
    else:
        max_start = video_length - need_length
        start = random.randint(0, max_start + 1)
    src.set_pos(start)
    ret, frame = src.read()
    result.append(format_frames(frame, output_size))
    for _ in range(n_frames - 1):
        for _ in range(frame_step):
            ret, frame = src.read()
        if ret:
            frame = format_frames(frame, output_size)
            result.append(frame)
        else:
            result.append(np.zeros_like(result[0]))
    src.release()
    result = np.array(result)[..., [2, 1, 0]]
    return result


class FrameGenerator:
    def __init__(self, path, n_frames, training=False):
        self.path = path
        self.n_frames = n_frames
        self.training = training
        self.class_names = sorted(set(p.name for p in self.path.iterdir() if p.is_dir()))
        self.class_ids_for_name = dict((name, idx) for idx, name in enumerate(self.class_names))

    def get_files_and_class_names(self):
        video_paths = list(self.path.glob("*/*.gif"))
        classes = [p.parent.name for p in video_paths]
        return video_paths, classes

    def __call__(self):
        video_paths, classes = self.get_files_and_class_names()
        pairs = list(zip(video_paths, classes, strict=True))
        if self.training:
            random.shuffle(pairs)
        for path, name in pairs:
            video_frames = frames_from_video_file(path, self.n_frames)
            label = self.class_ids_for_name[name]
            yield video_frames, label


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    output_signature = (
        tf.TensorSpec(shape=(None, None, None, 3), dtype=tf.float32),
        tf.TensorSpec(shape=(), dtype=tf.int16),
    )
    train_ds = tf.data.Dataset.from_generator(
        FrameGenerator(Path(dir) / "train", n_frames, training=True),
        output_signature=output_signature,
    )
    return train_ds.batch(batch_size)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    root = Path(dir) / "train"
    class_names = sorted(p.name for p in root.iterdir() if p.is_dir())
    paths = sorted(str(p) for p in root.glob("*/*.gif"))
    labels = [class_names.index(Path(p).parent.name) for p in paths]
    picks = tf.range(n_frames) * frame_step  # short videos: start 0, as the generator

    def load(path, label):
        video = tf.io.decode_gif(tf.io.read_file(path))  # (frames, h, w, 3) uint8, RGB
        present = picks < tf.shape(video)[0]
        frames = tf.gather(video, tf.minimum(picks, tf.shape(video)[0] - 1))
        frames = tf.image.resize_with_pad(
            tf.image.convert_image_dtype(frames, tf.float32), 224, 224
        )
        frames = tf.where(present[:, None, None, None], frames, 0.0)
        return frames, tf.cast(label, tf.int16)

    ds = tf.data.Dataset.from_tensor_slices((paths, labels)).shuffle(len(paths))
    ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """The tutorial's (2+1)D idea made small: a spatial then a temporal Conv3D."""
    layers = keras.layers
    inputs = layers.Input(shape=(n_frames, 224, 224, 3))
    x = layers.Conv3D(4, (1, 7, 7), strides=(1, 4, 4), padding="same")(inputs)
    x = layers.Conv3D(4, (3, 1, 1), padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.GlobalAveragePooling3D()(x)
    m = keras.Model(inputs, layers.Dense(len(CLASSES))(x))
    m.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=keras.optimizers.Adam(learning_rate=0.0001),
        metrics=["accuracy"],
    )
    return m
