"""The files the user pipelines read, each kind written once into its own folder (small:
seconds to make): TFRecord shards of Examples, gzipped shards, .npy arrays, JPEG files in
class folders, a TSV of sentences and a CSV. `make(kind, folder)` writes one kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

DIM = 32  # features per record / CSV row
N = 2048  # examples of the record, array, text and CSV data
IMAGES = 512  # JPEG files (two classes)
IMAGE_SIZE = 64  # pixels of a JPEG side
WORDS = (
    "the a cat dog sat ran on under mat tree big small red blue quick slow fox jumps "
    "over lazy river stone light dark old new"
).split()


def vectors(n: int = N, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """float32 features [n, DIM] and 0/1 labels [n, 1] (exact in float32 and float64)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, DIM)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
    return x, y


def _example(x: np.ndarray, y: np.ndarray) -> bytes:
    import tensorflow as tf

    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=x)),
        "y": tf.train.Feature(float_list=tf.train.FloatList(value=y)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _shards(folder: Path, files: int, compression: str | None) -> None:
    import tensorflow as tf

    x, y = vectors()
    options = tf.io.TFRecordOptions(compression_type=compression or "")
    for f in range(files):
        with tf.io.TFRecordWriter(str(folder / f"part-{f:03d}.tfrecord"), options) as w:
            for i in range(f, N, files):
                w.write(_example(x[i], y[i]))


def records(folder: Path) -> None:
    """16 uncompressed shards of Examples {x: float[DIM], y: float[1]}."""
    _shards(folder, 16, None)


def records_gz(folder: Path) -> None:
    """32 GZIP shards of the same Examples (decompressing is real work per file)."""
    _shards(folder, 32, "GZIP")


def arrays(folder: Path) -> None:
    """x.npy / y.npy (float32 vectors), images.npy (uint8 [N, 32, 32, 3]), wide.npy."""
    x, y = vectors()
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    rng = np.random.default_rng(1)
    np.save(folder / "images.npy", rng.integers(0, 256, size=(N, 32, 32, 3), dtype="uint8"))
    np.save(folder / "wide.npy", rng.normal(size=(N, 256)).astype("float32"))


def jpegs(folder: Path) -> None:
    """IMAGES JPEG files of IMAGE_SIZE^2 pixels, half in cats/, half in dogs/."""
    import tensorflow as tf

    rng = np.random.default_rng(2)
    for i in range(IMAGES):
        label = ("cats", "dogs")[i % 2]
        (folder / label).mkdir(exist_ok=True)
        # Smooth gradients plus noise: a realistic JPEG size, not white noise.
        base = np.linspace(0, 255, IMAGE_SIZE)[None, :, None] * rng.uniform(0.3, 1.0, 3)
        img = np.clip(base + rng.normal(0, 20, (IMAGE_SIZE, IMAGE_SIZE, 3)), 0, 255)
        data = tf.io.encode_jpeg(img.astype("uint8"), quality=90).numpy()
        (folder / label / f"img{i:04d}.jpg").write_bytes(data)


def text(folder: Path) -> None:
    """reviews.tsv: N lines 'label<TAB>sentence' (4 to 40 words)."""
    rng = np.random.default_rng(3)
    lines = []
    for _ in range(N):
        words = rng.choice(WORDS, size=int(rng.integers(4, 41)))
        label = int("cat" in words)
        lines.append(f"{label}\t{' '.join(words)}")
    (folder / "reviews.tsv").write_text("\n".join(lines) + "\n")


def csv(folder: Path) -> None:
    """table.csv: a header f0..f{DIM-1},label and N rows of numbers."""
    x, y = vectors(seed=4)
    header = ",".join([f"f{i}" for i in range(DIM)] + ["label"])
    rows = [
        ",".join(f"{v:.4f}" for v in row) + f",{int(lab[0])}" for row, lab in zip(x, y, strict=True)
    ]
    (folder / "table.csv").write_text(header + "\n" + "\n".join(rows) + "\n")


MAKERS: dict[str, Callable[[Path], None]] = {
    "records": records,
    "records_gz": records_gz,
    "arrays": arrays,
    "jpegs": jpegs,
    "text": text,
    "csv": csv,
    "none": lambda folder: None,
}
DONE = ".complete"  # written last: a folder without it is remade


def make(kind: str, folder: Path) -> Path:
    """The data of `kind` in `folder`, written once (a later call finds it complete)."""
    from tfperf.util.lock import folder_lock

    folder = Path(folder)
    if (folder / DONE).exists():
        return folder
    with folder_lock(folder, "writing user-pipeline test data", what="data folder"):
        if not (folder / DONE).exists():
            MAKERS[kind](folder)
            (folder / DONE).write_text("ok\n")
    return folder
