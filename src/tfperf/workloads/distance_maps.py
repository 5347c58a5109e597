"""A thesis project's interactive object selection: a grayscale image, positive and negative user
clicks, and the target mask; the network sees the image plus two click distance maps.

Holds the generator, the offline step that `convert` runs once (vectorized numpy distance
maps written into the shards), the tuned batch step (casts and stacking only), the
thesis's original pipeline (distance maps per example, per pixel and per click in a plain
Python function inside tf.py_function, every step) and a tiny fully convolutional
segmenter.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.workloads.base import BinaryLogitsWorkload, Row

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

PAD = -1  # clicks are padded with (-1, -1) up to max_clicks per kind


def distance_maps(clicks: np.ndarray, size: int, clip: int = 255) -> np.ndarray:
    """(size, size, 2) uint8: per pixel the Euclidean distance to the nearest positive
    (channel 0) and negative (channel 1) click, rounded and clipped at `clip`; a kind with
    no clicks is `clip` everywhere. `clicks` is (2, K, 2) of (row, col), padded with -1.

    Vectorized over pixels, clicks and both kinds at once (no per-click loop).
    """
    clicks = np.asarray(clicks, np.int64)
    yy, xx = np.mgrid[0:size, 0:size]
    dy = yy[:, :, None, None] - clicks[None, None, :, :, 0]  # [S, S, 2, K]
    dx = xx[:, :, None, None] - clicks[None, None, :, :, 1]
    d2 = (dy * dy + dx * dx).astype(np.float64)
    d2 = np.where(clicks[None, None, :, :, 0] >= 0, d2, np.inf)
    # sqrt is monotonic, so sqrt(min d^2) equals min(sqrt d^2): one sqrt per pixel.
    d = np.sqrt(d2.min(axis=-1))
    return np.minimum(np.rint(np.minimum(d, clip)), clip).astype(np.uint8)


def distance_maps_python(
    clicks: Sequence[Sequence[Sequence[int]]], size: int, clip: int = 255
) -> np.ndarray:
    """The thesis's way: the same maps as `distance_maps`, one pixel and one click at a
    time in plain Python, as interactive-selection code of that era computed them.

    Equal values: Python's round and np.rint both round half to even (and sqrt of an
    integer is never exactly x.5), math.sqrt and np.sqrt are both correctly rounded, and
    the nearest click's distance is the same whether sqrt comes before or after the min.
    Its cost is size * size * clicks Python iterations: ~3 ms for a 64x64 image with
    ~5 clicks on this machine's Python 3.11, ~50 ms at 256x256.
    """
    out = np.empty((size, size, 2), np.uint8)
    for kind in range(2):
        points = [(int(r), int(c)) for r, c in clicks[kind] if r >= 0]
        for y in range(size):
            for x in range(size):
                nearest = float(clip)
                for cy, cx in points:
                    d = math.sqrt((y - cy) ** 2 + (x - cx) ** 2)
                    if d < nearest:
                        nearest = d
                out[y, x, kind] = min(round(nearest), clip)
    return out


class DistanceMapsWorkload(BinaryLogitsWorkload):
    name = "distance_maps"
    description = "interactive segmentation from image + click distance maps (computed offline)"
    default_batch_size = 32
    original_needs_raw = True  # the thesis computed the maps from raw clicks every step

    def __init__(
        self, image_size: int = 64, max_clicks: int = 5, clip: int = 255, filters: int = 16
    ):
        if image_size < 8 or image_size % 2:
            raise ValueError(
                f"distance_maps option image_size: expected an even size >= 8, found {image_size}"
            )
        if max_clicks < 1 or not 1 <= clip <= 255:
            raise ValueError(
                f"distance_maps options: expected max_clicks >= 1 and 1 <= clip <= 255 "
                f"(uint8 maps), found max_clicks={max_clicks}, clip={clip}"
            )
        super().__init__(image_size=image_size, max_clicks=max_clicks, clip=clip, filters=filters)
        self.image_size, self.max_clicks, self.clip = image_size, max_clicks, clip
        self.filters = filters

    # ---- data ------------------------------------------------------------------------
    def raw_schema(self) -> Schema:
        s, k = self.image_size, self.max_clicks
        return Schema.of(
            Feature(name="image", dtype="uint8", shape=(s, s)),
            Feature(name="clicks", dtype="int64", shape=(2, k, 2)),  # [pos/neg, k, (row, col)]
            Feature(name="mask", dtype="uint8", shape=(s, s)),
        )

    def schema(self) -> Schema:
        s = self.image_size
        return Schema.of(
            Feature(name="image", dtype="uint8", shape=(s, s)),
            Feature(name="dist", dtype="uint8", shape=(s, s, 2)),  # positive, negative
            Feature(name="mask", dtype="uint8", shape=(s, s)),
        )

    def generate(self, n: int, seed: int = 0) -> Iterator[Row]:
        """Textured background with 1-3 ellipses; one is the target; 1..K clicks inside
        it and 0..K outside."""
        rng = np.random.default_rng(seed)
        s, k = self.image_size, self.max_clicks
        yy, xx = np.mgrid[0:s, 0:s].astype(np.float32)
        for _ in range(n):
            img = rng.normal(100, 20, (s, s)).astype(np.float32)
            masks = []
            for _ in range(int(rng.integers(1, 4))):
                cy, cx = rng.uniform(0.2 * s, 0.8 * s, 2)
                ry, rx = rng.uniform(0.1 * s, 0.3 * s, 2)
                inside = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
                img[inside] = rng.uniform(0, 255) + rng.normal(0, 8, int(inside.sum()))
                masks.append(inside)
            target = int(rng.integers(len(masks)))
            mask = masks[target].copy()
            for later in masks[target + 1 :]:
                mask &= ~later  # what a later ellipse covers is not visible
            if not mask.any():  # fully hidden: select the topmost object instead
                mask = masks[-1]
            clicks = np.full((2, k, 2), PAD, np.int64)
            inside_px, outside_px = np.flatnonzero(mask), np.flatnonzero(~mask)
            n_pos = min(int(rng.integers(1, k + 1)), inside_px.size)
            n_neg = int(rng.integers(0, k + 1))
            pos = rng.choice(inside_px, n_pos, replace=False)
            neg = rng.choice(outside_px, n_neg, replace=False)
            clicks[0, :n_pos] = np.stack(np.unravel_index(pos, (s, s)), axis=1)
            clicks[1, :n_neg] = np.stack(np.unravel_index(neg, (s, s)), axis=1)
            image = np.clip(np.rint(img), 0, 255).astype(np.uint8)
            yield {"image": image, "clicks": clicks, "mask": mask.astype(np.uint8)}

    def offline_preprocess(self) -> Callable[[Row], Row]:
        """Raw row -> converted row: the distance maps, computed once by `convert`."""
        size, clip = self.image_size, self.clip

        def convert(row: Row) -> Row:
            dist = distance_maps(row["clicks"], size, clip)
            return {"image": row["image"], "dist": dist, "mask": row["mask"]}

        return convert

    # ---- the tuned pipeline: the maps are already in the shards ----------------------------
    def preprocess_batch(self, batch: dict[str, tf.Tensor]) -> tuple[Any, Any]:
        import tensorflow as tf

        image = tf.cast(batch["image"], tf.float32)[..., None]
        dist = tf.cast(batch["dist"], tf.float32)
        features = tf.concat([image, dist], axis=-1) / 255.0  # [B, S, S, 3] in [0, 1]
        return features, tf.cast(batch["mask"], tf.float32)[..., None]

    # ---- the original: distance maps in Python, per example, every step ---------------------
    def original_dataset(
        self, files: Sequence[str], batch_size: int, *, training: bool, seed: int | None = None
    ) -> tf.data.Dataset:
        """Raw shards -> parse_single_example -> tf.py_function(distance maps in Python)
        -> normalise -> batch -> repeat, as the thesis's input did per example.

        The original: its training input called a Python function that computed
        the distance maps from the clicks for every example at every step, and training
        ran at ~2.4 images/s on a GTX 1080, i.e. ~400 ms of Python per image.
        `distance_maps_python` is that function written plainly (per pixel, per click);
        here it costs ~3 ms per 64x64 image (~300 images/s for this whole pipeline on one
        core; the GIL keeps py_function from scaling with threads). The thesis's images
        were several times larger (a 500x375 photo is 46x the pixels of 64x64: ~130 ms
        here) and its Python ran slower, which accounts for the rest.
        """
        import tensorflow as tf

        files = list(files)
        if training:
            random.Random(seed).shuffle(files)
        raw = self.raw_schema()
        s, clip = self.image_size, self.clip
        ds = tf.data.TFRecordDataset(files)
        if training:
            ds = ds.shuffle(1000, seed=seed)
        ds = ds.map(raw.parse_one)

        def python_maps(clicks: tf.Tensor) -> np.ndarray:
            return distance_maps_python(clicks.numpy().tolist(), s, clip)

        def add_maps(ex: dict[str, tf.Tensor]) -> tuple[Any, Any]:
            dist = tf.py_function(python_maps, [ex["clicks"]], tf.uint8)
            dist.set_shape([s, s, 2])  # py_function forgets shapes
            image = tf.cast(ex["image"], tf.float32)[..., None] / 255.0
            features = tf.concat([image, tf.cast(dist, tf.float32) / 255.0], axis=-1)
            return features, tf.cast(ex["mask"], tf.float32)[..., None]

        ds = ds.map(add_maps)
        ds = ds.batch(batch_size, drop_remainder=training)
        return ds.repeat() if training else ds

    # ---- the model -----------------------------------------------------------------------
    def build_model(self) -> keras.Model:
        """A two-level U-Net: convs, one 2x pool, upsample, skip connection, 1x1 logit."""
        import keras

        f = self.filters
        inp = keras.Input(shape=(None, None, 3), name="image_and_maps")
        c1 = keras.layers.Conv2D(f, 3, padding="same", activation="relu")(inp)
        c1 = keras.layers.Conv2D(f, 3, padding="same", activation="relu")(c1)
        c2 = keras.layers.MaxPooling2D(2)(c1)
        c2 = keras.layers.Conv2D(2 * f, 3, padding="same", activation="relu")(c2)
        c2 = keras.layers.Conv2D(2 * f, 3, padding="same", activation="relu")(c2)
        up = keras.layers.UpSampling2D(2)(c2)
        x = keras.layers.Concatenate()([up, c1])
        x = keras.layers.Conv2D(f, 3, padding="same", activation="relu")(x)
        # float32 logits even under a mixed-precision policy.
        out = keras.layers.Conv2D(1, 1, dtype="float32", name="logit")(x)
        return keras.Model(inp, out, name="distance_maps")
