"""Helpers of the doctor's tests: small real pipelines the diagnosis, the graph reading and the
rewrites are tested on (blocks of records split by a later unbatch, as tfperf's own reader
yields them; variable-length examples parsed one at a time before a padded_batch; small text
files whose names are shuffled and decoded one by one; small JPEG files), and run files of
a module of user pipelines for a real `tfperf doctor` process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
import yaml

# ---- blocks of records split by a later unbatch (as tfperf's own reader yields them) --------
BLOCK, BATCH = 64, 32


def read_blocks(source: tf.Tensor) -> tf.data.Dataset:
    return tf.data.Dataset.range(256).batch(BLOCK)


def double(x: tf.Tensor) -> tf.Tensor:
    return x * 2


def blocked_pipeline() -> tf.data.Dataset:
    """Four sources of 256 values each, read in blocks of 64, split, batched by 32."""
    blocks = tf.data.Dataset.range(4).interleave(read_blocks, cycle_length=2, num_parallel_calls=2)
    return blocks.map(double).unbatch().batch(BATCH).map(double).prefetch(1)


# ---- variable-length examples parsed one at a time, then a padded_batch ---------------------
TOKENS_SPEC = {
    "tokens": tf.io.VarLenFeature(tf.int64),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def token_records(n: int = 512) -> list[bytes]:
    """`n` serialized Examples: 3 to 39 token ids and a label."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        ids = rng.integers(1, 100, int(rng.integers(3, 40)))
        feats = {
            "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=ids)),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(ids[0] > 50)])),
        }
        ex = tf.train.Example(features=tf.train.Features(feature=feats))
        out.append(ex.SerializeToString())
    return out


def parse_tokens(rec):
    ex = tf.io.parse_single_example(rec, TOKENS_SPEC)
    return {"tokens": tf.cast(tf.sparse.to_dense(ex["tokens"]), tf.int32)}, ex["label"]


def padded_pipeline(batch_size: int = 32) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices(token_records()).map(parse_tokens)
    return ds.padded_batch(batch_size, padded_shapes=({"tokens": [None]}, []))


# ---- small text files: names shuffled first (as list_files does), each file decoded --------
FILES = 20


def write_files(tmp_path: Path) -> list[str]:
    """FILES text files 'i i*i' in tmp_path; their paths."""
    paths = []
    for i in range(FILES):
        p = tmp_path / f"f{i:02d}.txt"
        p.write_text(f"{i} {i * i}")
        paths.append(str(p))
    return paths


def decode(path):
    text = tf.io.read_file(path)
    return tf.strings.to_number(tf.strings.split(text, " "), tf.int64)


def files_pipeline(paths: list[str], buffer: int = FILES) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices(paths).shuffle(buffer)  # list_files' shuffle
    return ds.map(decode).batch(4).prefetch(tf.data.AUTOTUNE)


def epoch(ds: tf.data.Dataset) -> list[tuple[int, int]]:
    return [tuple(int(v) for v in row) for batch in ds for row in batch.numpy()]


# ---- small JPEG files -----------------------------------------------------------------------
def jpegs(folder: Path, n: int = 6) -> str:
    """`n` small JPEG files; their glob."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        pixels = tf.random.stateless_uniform([20, 24, 3], seed=[i, 1], maxval=255, dtype=tf.int32)
        tf.io.write_file(str(folder / f"{i}.jpg"), tf.io.encode_jpeg(tf.cast(pixels, tf.uint8)))
    return str(folder / "*.jpg")


def load_jpeg(path):
    image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    return tf.image.resize(image, [16, 16]) / 255.0


# ---- run files of a module of user pipelines, for a real `tfperf doctor` process -----------
# Small probes: these tests are about the budgets (RAM, wall time), not precision.
FAST = {"steps": 4, "warmup": 2, "repeats": 2, "min_seconds": 0.05, "what_ifs": []}
RAM_MB = 16  # the RAM budget of these run files: far below what a big pipeline would hold


def write_run(
    folder: Path, module: str, source: str, function: str, model: str, **extra: Any
) -> Path:
    """`folder/<function>.yaml` naming `<module>:<function>` and its model, with `source`
    written to `folder/<module>.py`; `extra` updates the run file's sections."""
    (folder / f"{module}.py").write_text(source)
    run: dict[str, Any] = {
        "data": {"pipeline": f"{module}:{function}"},
        "model": {"name": f"{module}:{model}", "loss": "mse"},
        "pipeline": {"batch_size": 8, "shuffle_ram_mb": RAM_MB},
        "doctor": dict(FAST),
    }
    for key, value in extra.items():
        run[key].update(value)
    path = folder / f"{function}.yaml"
    path.write_text(yaml.safe_dump(run, sort_keys=False))
    return path


def start_doctor(run: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`tfperf doctor RUN ARGS...` as a real process in the run file's folder, stdout and
    stderr piped."""
    cmd = [sys.executable, "-m", "tfperf.cli.main", "doctor", str(run), *args]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.Popen(
        cmd, cwd=run.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
