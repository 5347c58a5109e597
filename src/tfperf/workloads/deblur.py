"""The TF2 training-time tutorial's deblurring: (blurred, sharp) full-size image pairs,
stored as PNG files are, from which training crops patches; both images of a pair must
get the same random patch.

Holds the generator (PNG-encoded pairs), the offline step `convert` runs once (decode both
PNGs: the tutorial's "cache of loaded images before patch selection", done offline), the
tuned whole-batch crop (one gather with per-example offsets, so the pair cannot drift
apart), the tutorial's original Keras PyDataset (per item: read the record, decode both
PNGs with PIL, crop in Python; `original_sequence` for `model.fit`, `original_dataset` for
tf.data) and a small fully convolutional ResNet-style model.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.data.verify import index_tfrecord, iter_tfrecord
from tfperf.util.format import quoted
from tfperf.workloads.base import Row, Workload

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

CROPS = ("random", "center")
MAX_PATCH = 256  # the tutorial's patch


def encode_png(image: np.ndarray) -> bytes:
    """(H, W, 3) uint8 -> PNG bytes (PIL's default compression, as image files are saved)."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    """PNG bytes -> (H, W, 3) uint8, decoded by PIL (as the tutorial's loader read files)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data), formats=["PNG"]) as img:
            return np.asarray(img.convert("RGB"))
    except UnidentifiedImageError:
        raise ValueError(f"deblur: not a PNG image (starts with {bytes(data[:8])!r})") from None


def box_blur(image: np.ndarray, radius: int) -> np.ndarray:
    """Mean over a (2r+1)^2 window, edges replicated, rounded to uint8 (exact integers)."""
    if radius <= 0:
        return image.copy()
    k = 2 * radius + 1
    img = np.pad(image.astype(np.int64), ((radius, radius), (radius, radius), (0, 0)), "edge")
    # Integral image: every window sum in four lookups, no float rounding anywhere.
    s = np.pad(img.cumsum(0).cumsum(1), ((1, 0), (1, 0), (0, 0)))
    h, w = image.shape[:2]
    win = s[k : k + h, k : k + w] - s[:h, k : k + w] - s[k : k + h, :w] + s[:h, :w]
    return ((2 * win + k * k) // (2 * k * k)).astype(np.uint8)  # round half up


def _synthetic_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A colour gradient, a few rectangles and discs, and fine noise (so every patch is
    unique, which lets tests find where a patch came from)."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    yy, xx = yy / height, xx / width
    c0, c1, c2 = rng.uniform(0, 255, (3, 3)).astype(np.float32)
    img = c0 + (c1 - c0) * yy[..., None] + (c2 - c0) * xx[..., None]
    for _ in range(int(rng.integers(3, 8))):
        color = rng.uniform(0, 255, 3).astype(np.float32)
        cy, cx = rng.uniform(0, 1, 2)
        r = rng.uniform(0.05, 0.3)
        if rng.random() < 0.5:
            inside = (np.abs(yy - cy) < r) & (np.abs(xx - cx) < r * rng.uniform(0.3, 1.5))
        else:
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
        img[inside] = color
    img += rng.normal(0, 6, img.shape).astype(np.float32)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


class DeblurWorkload(Workload):
    name = "deblur"
    description = "deblurring CNN on (blurred, sharp) patches cropped alike"
    default_batch_size = 16
    loss = "mse"
    metrics = ("mae",)

    original_needs_raw = True  # the tutorial decoded the image files at every step

    def __init__(
        self,
        image_height: int = 180,
        image_width: int = 320,
        patch: int = 64,
        blur_radius: int = 2,
        crop: str = "random",
        crop_seed: int = 0,
        filters: int = 32,
        blocks: int = 3,
    ):
        # 64x64 patches keep CPU steps short; the tutorial trained on 256x256 patches of
        # 1280x720 (GoPro) frames. The default 320x180 keeps its frame : patch ratio
        # (1280 / 256 = 5 patches wide, 720 / 256 = 2.8 high): 320 = 5 x 64, 180 = 2.8 x 64.
        if not 1 <= patch <= min(MAX_PATCH, image_height, image_width):
            raise ValueError(
                f"deblur options: expected 1 <= patch <= min({MAX_PATCH}, image_height, "
                f"image_width), found patch={patch}, image_height={image_height}, "
                f"image_width={image_width}"
            )
        if crop not in CROPS:
            raise ValueError(f"deblur option crop: expected one of {CROPS}, found {quoted(crop)}")
        super().__init__(
            image_height=image_height,
            image_width=image_width,
            patch=patch,
            blur_radius=blur_radius,
            crop=crop,
            crop_seed=crop_seed,
            filters=filters,
            blocks=blocks,
        )
        self.height, self.width = image_height, image_width
        self.patch, self.blur_radius = patch, blur_radius
        self.crop, self.crop_seed = crop, crop_seed
        self.filters, self.blocks = filters, blocks

    # ---- data ------------------------------------------------------------------------
    def raw_schema(self) -> Schema:
        """The pair as image files hold it: one PNG per image."""
        return Schema.of(
            Feature(name="blurred", dtype="bytes"), Feature(name="sharp", dtype="bytes")
        )

    def schema(self) -> Schema:
        """The converted shards: both images decoded to uint8 pixels."""
        shape = (self.height, self.width, 3)
        return Schema.of(
            Feature(name="blurred", dtype="uint8", shape=shape),
            Feature(name="sharp", dtype="uint8", shape=shape),
        )

    def generate(self, n: int, seed: int = 0) -> Iterator[Row]:
        rng = np.random.default_rng(seed)
        for _ in range(n):
            sharp = _synthetic_image(rng, self.height, self.width)
            blurred = box_blur(sharp, self.blur_radius)
            yield {"blurred": encode_png(blurred), "sharp": encode_png(sharp)}

    def offline_preprocess(self) -> Callable[[Row], Row]:
        """Raw row -> converted row: both PNGs decoded once, by `convert`."""
        shape = (self.height, self.width, 3)

        def decode(row: Row) -> Row:
            out = {k: decode_png(row[k]) for k in ("blurred", "sharp")}
            for k, v in out.items():
                if v.shape != shape:
                    raise ValueError(f"deblur: image '{k}' is {v.shape}, expected {shape}")
            return out

        return decode

    # ---- the tuned pipeline --------------------------------------------------------------
    def crop_offsets(self, batch: dict[str, tf.Tensor]) -> tf.Tensor:
        """[B, 2] (row, col) patch offsets, one per example.

        Stateless random ops keep the pipeline checkpointable (a stateful op makes
        tf.data refuse to save the iterator). The seed mixes crop_seed with a fingerprint
        of the batch: a reshuffled epoch regroups examples, so each gets new patches,
        while an unshuffled evaluation always sees the same ones.
        """
        import tensorflow as tf

        sharp = batch["sharp"]
        n = tf.shape(sharp)[0]
        h, w, p = self.height, self.width, self.patch
        if self.crop == "center":
            return tf.tile(tf.constant([[(h - p) // 2, (w - p) // 2]], tf.int32), [n, 1])
        per_example = tf.fingerprint(tf.reshape(sharp[:, 0], [n, -1]))  # first row of each
        key = tf.bitcast(tf.fingerprint(tf.reshape(per_example, [1, -1]))[0], tf.int64)
        seed = tf.stack([tf.constant(self.crop_seed, tf.int64), key])
        rows = tf.random.stateless_uniform([n], seed, 0, h - p + 1, dtype=tf.int32)
        seed_x = tf.random.experimental.stateless_fold_in(seed, 1)
        cols = tf.random.stateless_uniform([n], seed_x, 0, w - p + 1, dtype=tf.int32)
        return tf.stack([rows, cols], axis=1)

    def preprocess_batch(self, batch: dict[str, tf.Tensor]) -> tuple[Any, Any]:
        import tensorflow as tf

        h, w, p = self.height, self.width, self.patch
        offsets = self.crop_offsets(batch)
        steps = tf.range(p)
        n = tf.shape(offsets)[0]
        # Flat pixel indices [B, P, P] into [B*H*W, 3]: one gather copies whole pixels,
        # and the one index tensor serves both images, so their patches cannot differ.
        rows = (tf.range(n)[:, None] * h + offsets[:, :1] + steps) * w  # [B, P]
        cols = offsets[:, 1:] + steps  # [B, P]
        index = rows[:, :, None] + cols[:, None, :]

        # Keeps the static batch size (drop_remainder) that the gather loses: the train
        # function is then traced on the same shapes as a cached batch (compute limit).
        static = [batch["sharp"].shape[0] or -1, p, p, 3]

        def crop(images: tf.Tensor) -> tf.Tensor:
            pixels = tf.gather(tf.reshape(images, [-1, 3]), index)  # [B, P, P, 3] uint8
            return tf.reshape(tf.cast(pixels, tf.float32) / 255.0, static)

        return crop(batch["blurred"]), crop(batch["sharp"])

    # ---- the original: a Keras PyDataset, numpy in Python -----------------------------------
    def original_sequence(
        self,
        files: Sequence[str],
        batch_size: int,
        *,
        training: bool = True,
        seed: int | None = None,
        **pydataset_options: Any,
    ) -> keras.utils.PyDataset:
        """The tutorial's loader, for `model.fit` (pydataset_options: workers, ...); `files`
        are raw shards (PNG bytes, the split `raw_split`)."""
        return _sequence_class()(
            self, files, batch_size, training=training, seed=seed, **pydataset_options
        )

    def original_dataset(
        self, files: Sequence[str], batch_size: int, *, training: bool, seed: int | None = None
    ) -> tf.data.Dataset:
        """The PyDataset's batches through Dataset.from_generator, one epoch after another
        (training) or one pass (evaluation)."""
        import tensorflow as tf

        files = list(files)
        if training and len(self.original_sequence(files, batch_size, training=True)) == 0:
            raise ValueError(f"deblur: fewer records than one batch of {batch_size} in {files}")

        def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            seq = self.original_sequence(files, batch_size, training=training, seed=seed)
            while True:
                for i in range(len(seq)):
                    yield seq[i]
                if not training:
                    return
                seq.on_epoch_end()

        spec = tf.TensorSpec([None, self.patch, self.patch, 3], tf.float32)
        return tf.data.Dataset.from_generator(batches, output_signature=(spec, spec))

    # ---- the model -----------------------------------------------------------------------
    def build_model(self) -> keras.Model:
        """Conv stem, `blocks` residual blocks, conv to 3 channels, plus the input: the net
        learns the sharpening residual. Any input size (fully convolutional)."""
        import keras

        inp = keras.Input(shape=(None, None, 3), name="blurred")
        x = keras.layers.Conv2D(self.filters, 3, padding="same", activation="relu")(inp)
        for _ in range(self.blocks):
            y = keras.layers.Conv2D(self.filters, 3, padding="same", activation="relu")(x)
            y = keras.layers.Conv2D(self.filters, 3, padding="same")(y)
            x = keras.layers.ReLU()(keras.layers.Add()([x, y]))
        residual = keras.layers.Conv2D(3, 3, padding="same")(x)
        # float32 output even under a mixed-precision policy, so the loss sees float32.
        out = keras.layers.Add(dtype="float32", name="sharp")([inp, residual])
        return keras.Model(inp, out, name="deblur")


@cache
def _sequence_class() -> type:
    """Builds the PyDataset subclass on first use, so importing this module stays free of
    Keras; `DeblurSequence` below resolves to it (also for pickling to worker processes)."""
    import keras

    class DeblurSequence(keras.utils.PyDataset):
        """Pairs read from disk per item, both PNGs decoded by PIL, cropped in numpy (as
        the tutorial's Keras Sequence did)."""

        def __init__(
            self,
            wl: DeblurWorkload,
            files: Sequence[str],
            batch_size: int,
            *,
            training: bool,
            seed: int | None,
            **kwargs: Any,
        ):
            super().__init__(**kwargs)
            self.wl, self.batch_size, self.training = wl, batch_size, training
            self.schema = wl.raw_schema()  # PNG bytes, decoded per item below
            self.rng = np.random.default_rng(seed)
            # Metadata in memory, pixels on disk: (file, offset, length) per record;
            # gzip shards cannot seek, so their records are held in memory instead.
            self.items: list[tuple[str, int, int] | bytes] = []
            for path in files:
                with open(path, "rb") as f:
                    gz = f.read(2) == b"\x1f\x8b"
                if gz:
                    self.items.extend(iter_tfrecord(path))
                else:
                    self.items.extend((path, o, n) for o, n in index_tfrecord(path))
            self.order = np.arange(len(self.items))
            if training:
                self.rng.shuffle(self.order)

        def __len__(self) -> int:
            n = len(self.items) / self.batch_size
            return math.floor(n) if self.training else math.ceil(n)

        def _load(self, item: tuple[str, int, int] | bytes) -> dict[str, np.ndarray]:
            if isinstance(item, bytes):
                row = self.schema.decode_numpy(item)
            else:
                path, offset, length = item
                with open(path, "rb") as f:
                    f.seek(offset)
                    row = self.schema.decode_numpy(f.read(length))
            # Whole images decoded for one patch each: the cost that starved the GPU.
            return {k: decode_png(row[k]) for k in ("blurred", "sharp")}

        def __getitem__(self, idx: int) -> tuple[np.ndarray, np.ndarray]:
            if not 0 <= idx < len(self):
                raise IndexError(f"batch {idx} of {len(self)}")
            p, h, w = self.wl.patch, self.wl.height, self.wl.width
            blurred, sharp = [], []
            for i in self.order[idx * self.batch_size : (idx + 1) * self.batch_size]:
                row = self._load(self.items[i])
                if self.wl.crop == "center":
                    oy, ox = (h - p) // 2, (w - p) // 2
                else:
                    oy, ox = self.rng.integers(0, [h - p + 1, w - p + 1])
                # The same (oy, ox) for both images: the pitfall the tutorial warns of.
                blurred.append(row["blurred"][oy : oy + p, ox : ox + p])
                sharp.append(row["sharp"][oy : oy + p, ox : ox + p])
            x = np.stack(blurred).astype(np.float32) / 255.0
            y = np.stack(sharp).astype(np.float32) / 255.0
            return x, y

        def on_epoch_end(self) -> None:
            if self.training:
                self.rng.shuffle(self.order)

    DeblurSequence.__module__ = __name__
    DeblurSequence.__qualname__ = "DeblurSequence"
    return DeblurSequence


def __getattr__(name: str) -> Any:
    # Lazy module attribute (PEP 562): `from tfperf.workloads.deblur import DeblurSequence`.
    if name == "DeblurSequence":
        return _sequence_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
