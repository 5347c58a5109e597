"""What several ported pipelines share: small stand-in files written with numpy and
TensorFlow only (JPEG folders, a CSV read the way pandas types its columns), and the
float32 view the same-examples check compares."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np


def write_jpegs(
    root: Path, classes: list[str], per_class: int, seed: int = 0, large: bool = False
) -> None:
    """`root/<class>/<i>.jpg`: smooth random pictures of varied sizes (as photos are): about
    100x80 pixels, or with `large` about 400x300 (a photo collection's usual size)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            if large:
                h, w = int(rng.integers(240, 360)), int(rng.integers(320, 500))
            else:
                h, w = int(rng.integers(60, 100)), int(rng.integers(70, 110))
            image = picture(rng, h, w, tint=c)
            (root / name / f"{c}_{i}.jpg").write_bytes(tf.io.encode_jpeg(image).numpy())


def picture(rng: np.random.Generator, h: int, w: int, tint: int = 0) -> np.ndarray:
    """An (h, w, 3) uint8 picture: a gradient, a tint and noise (JPEG-friendly)."""
    y, x = np.mgrid[0:h, 0:w]
    base = (x * 255 // max(1, w - 1) + y * 128 // max(1, h - 1))[..., None]
    noise = rng.integers(0, 40, size=(h, w, 3))
    tints = np.array([(tint * 53) % 256, (tint * 97) % 256, (tint * 31) % 256])
    return ((base + noise + tints) % 256).astype(np.uint8)


def read_csv(path: str | Path) -> dict[str, np.ndarray]:
    """Columns of a CSV typed as `pandas.read_csv` types them: int64 when every value is an
    integer, float64 when a number, else object (Python strings). pandas is not installed
    here; the ported pipelines start from what it would have returned."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    out: dict[str, np.ndarray] = {}
    for j, name in enumerate(header):
        values = [r[j] for r in body]
        for kind in (np.int64, np.float64):
            try:
                out[name] = np.array([kind(v) for v in values], dtype=kind)
                break
            except ValueError:
                continue
        else:
            out[name] = np.array(values, dtype=object)
    return out


def float32_view(ds: Any) -> Any:
    """`ds` with every floating tensor cast to float32: a twin that casts float64 at the
    source yields the same examples as its float64 original once both are float32 (the
    multiset check rounds to 5 decimals, which float32 and float64 may round apart)."""
    import tensorflow as tf

    def cast(*element: Any) -> Any:
        element = element[0] if len(element) == 1 else element
        return tf.nest.map_structure(
            lambda t: (
                tf.cast(t, tf.float32) if isinstance(t, tf.Tensor) and t.dtype.is_floating else t
            ),
            element,
        )

    return ds.map(cast)


# Distinct pictures encoded for a full-size case: its thousands of records are cycled over
# them (each decodes at a photo's cost; encoding a new one for each would make the writing
# take many minutes).
DISTINCT = 256


def reused(size: str) -> Any:
    """key(i): the index of the encoded picture record i reuses (its own at size small, one
    of DISTINCT at size full)."""
    return (lambda i: i % DISTINCT) if size == "full" else (lambda i: i)


def count(size: str, small: int, full: int) -> int:
    """How many examples a case writes at `size` ("small" for the tests, "full" for its
    original's size)."""
    if size not in ("small", "full"):
        raise ValueError(f"size {size!r}: 'small' or 'full'")
    return full if size == "full" else small


def write_tfrecords(path_pattern: str, examples: Any, shards: int) -> None:
    """Serialized tf.train.Examples (an iterable of dicts name -> list of int, float, bytes
    or str) into `shards` TFRecord files named path_pattern % (shard, shards), round
    robin."""
    import tensorflow as tf

    def feature(values: Any) -> Any:
        values = list(values)
        if values and isinstance(values[0], (bytes, str)):
            data = [v.encode() if isinstance(v, str) else v for v in values]
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=data))
        if values and isinstance(values[0], (float, np.floating)):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    writers = [tf.io.TFRecordWriter(path_pattern % (s, shards)) for s in range(shards)]
    try:
        for i, ex in enumerate(examples):
            features = tf.train.Features(feature={k: feature(v) for k, v in ex.items()})
            writers[i % shards].write(tf.train.Example(features=features).SerializeToString())
    finally:
        for w in writers:
            w.close()
