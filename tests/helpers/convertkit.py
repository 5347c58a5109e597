"""Helpers of the convert and source tests: a schema with every dtype and rows for it,
a small dataset of 40 rows in 3 shards or more,
a split read back through the real pipeline (data/pipeline.py) as numpy rows, rows compared
feature by feature, the bytes of a folder's shards, and a `tfperf convert` error read as
one paragraph."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tfperf.config import PipelineConfig
from tfperf.data.convert.run import convert
from tfperf.data.manifest import Manifest, load_manifest
from tfperf.data.pipeline import make_dataset
from tfperf.data.schema import Feature, Schema

ALL = Schema.of(
    Feature(name="id", dtype="int64"),
    Feature(name="f32", dtype="float32", shape=(2,)),
    Feature(name="f64", dtype="float64", shape=(2, 2)),
    Feature(name="i32", dtype="int32", shape=(3,)),
    Feature(name="u8", dtype="uint8", shape=(2, 2, 3)),
    Feature(name="i8", dtype="int8", shape=(2,)),
    Feature(name="b", dtype="bool", shape=(2,)),
    Feature(name="s", dtype="bytes"),
    Feature(name="vi", dtype="int64", varlen=True),
    Feature(name="vf", dtype="float32", varlen=True),
)


SMALL = Schema.of(
    Feature(name="id", dtype="int64"),
    Feature(name="v", dtype="float32", shape=(4,)),
    Feature(name="s", dtype="bytes"),
)


def small_dataset(parent: Path, compression: str = "") -> tuple[Path, Manifest]:
    """40 rows of SMALL converted into `parent`/ds, 3 shards or more; the folder, its
    manifest."""
    rows = [{"id": i, "v": np.full(4, i, np.float32), "s": b"x" * (i % 7)} for i in range(40)]
    root = parent / "ds"
    m = convert(
        rows,
        root,
        schema=SMALL,
        shard_bytes=600,
        compression=compression,
        workers=1,
        progress=False,
    )
    assert len(m.splits["train"].shards) >= 3
    return root, m


def all_dtypes_row(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {
        "id": np.int64(2**40 + i),
        "f32": rng.standard_normal(2).astype(np.float32),
        "f64": rng.standard_normal((2, 2)),
        "i32": np.array([-(2**31), 2**31 - 1, i], np.int32),
        "u8": rng.integers(0, 256, (2, 2, 3)).astype(np.uint8),
        "i8": np.array([-128, i % 100], np.int8),
        "b": np.array([i % 2 == 0, True]),
        "s": f"row{i}".encode() * (i % 5 + 1),
        "vi": np.arange(i % 4, dtype=np.int64),
        "vf": np.linspace(0, 1, i % 3 + 1).astype(np.float32),
    }


def read_back(root: Path, split: str = "train", parse: str = "batched") -> list[dict]:
    """Every record of a split through the real pipeline (file order kept), as numpy rows."""
    m = load_manifest(root)
    schema = m.split_schema(split)
    opts = PipelineConfig(batch_size=3, interleave_cycle=1, parse=parse)
    ds = make_dataset(
        m.shard_paths(root, split),
        opts,
        training=False,
        parse=schema.parse_batch,
        parse_one=schema.parse_one,
        compression=m.compression,
    )
    rows = []
    for batch in ds:
        n = int(batch[schema.names[0]].shape[0])
        for i in range(n):
            row = {}
            for f in schema.features:
                v = batch[f.name][i]
                row[f.name] = np.asarray(v.to_list() if hasattr(v, "to_list") else v.numpy())
            rows.append(row)
    return rows


def assert_rows_equal(got: list[dict], want: list[dict], schema: Schema) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        for f in schema.features:
            if f.dtype == "bytes":
                assert g[f.name].item() == (
                    w[f.name] if isinstance(w[f.name], bytes) else str(w[f.name]).encode()
                ), (i, f.name)
                continue
            np.testing.assert_array_equal(g[f.name], np.asarray(w[f.name]), err_msg=f"{i} {f.name}")
            if not f.varlen or len(w[f.name]):
                assert g[f.name].dtype == np.dtype(f.dtype), (f.name, g[f.name].dtype)


def shard_bytes_of(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.tfrecord-*"))}


def one_paragraph(res) -> str:
    """A `cli` result's error: exit 2, no traceback, one paragraph starting "error:"; its
    words joined by single spaces."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    text = res.stderr.strip()
    assert text.startswith("error:") and "\n\n" not in text, text
    return " ".join(text.split())
