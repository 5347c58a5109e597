"""data/tfds_export.py: `convert --tfds-metadata` (and write_tfds_metadata) writes TFDS's
dataset_info.json and features.json beside the shards: `tfds.builder_from_directory(DIR)`
then loads every split with the same values, a split name with a '.' included."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.schema import Feature, Schema
from tfperf.data.tfds_export import TfdsExportError, write_tfds_metadata

tfds = pytest.importorskip("tensorflow_datasets")

SCHEMA = Schema.of(
    Feature(name="id", dtype="int64"),
    Feature(name="x", dtype="float32", shape=(2,)),
    Feature(name="img", dtype="uint8", shape=(2, 2, 3)),
    Feature(name="d", dtype="float64", shape=(2,)),
    Feature(name="i32", dtype="int32", shape=(3,), storage="bytes"),
    Feature(name="flag", dtype="bool"),
    Feature(name="text", dtype="bytes"),
    Feature(name="tokens", dtype="int64", varlen=True),
    Feature(name="weights", dtype="float32", varlen=True),
)


def _row(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {
        "id": i,
        "x": rng.standard_normal(2).astype(np.float32),
        "img": rng.integers(0, 256, (2, 2, 3)).astype(np.uint8),
        "d": rng.standard_normal(2),
        "i32": np.array([i, -i, 2**31 - 1], np.int32),
        "flag": i % 2 == 0,
        "text": f"row {i}".encode(),
        "tokens": np.arange(i % 4, dtype=np.int64),
        "weights": np.linspace(0, 1, i % 3).astype(np.float32),
    }


def _load(root, split) -> list[dict]:
    builder = tfds.builder_from_directory(str(root))
    return [
        {k: np.asarray(v) for k, v in ex.items()}
        for ex in tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False))
    ]


def _same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for f in SCHEMA.features:
            expected = np.asarray(w[f.name], dtype=None if f.dtype == "bytes" else f.dtype)
            np.testing.assert_array_equal(g[f.name], expected, err_msg=f.name)
            if f.dtype != "bytes":
                assert g[f.name].dtype == np.dtype(f.dtype), f.name


def test_builder_from_directory_loads_every_split(tmp_path, cli):
    rows = [_row(i) for i in range(30)]
    out = tmp_path / "o"
    convert(rows, out, schema=SCHEMA, name="my.data", shard_bytes=600, workers=1, progress=False)
    convert(rows[:7], out, schema=SCHEMA, name="my.data", split="eval.small", progress=False)
    written = write_tfds_metadata(out)
    assert {p.name for p in written.files} == {"dataset_info.json", "features.json"}
    assert written.splits == {"train": "train", "eval.small": "eval_small"}
    info = json.loads((out / "dataset_info.json").read_text())
    assert len(info["splits"][0]["shardLengths"]) > 2  # several shards
    _same(_load(out, "train"), rows)
    _same(_load(out, "eval_small"), rows[:7])


def test_convert_option_writes_and_refreshes_the_metadata(tmp_path, cli):
    np.savez(tmp_path / "d.npz", x=np.arange(12, dtype=np.float32).reshape(6, 2))
    out = tmp_path / "o"
    res = cli("convert", tmp_path / "d.npz", "--out", out, "--tfds-metadata", "--quiet")
    assert res.exit_code == 0, res.output
    assert "dataset_info.json" in res.stdout
    # a later convert into the same folder keeps the TFDS metadata up to date
    res = cli("convert", tmp_path / "d.npz", "--out", out, "--split", "test", "--quiet")
    assert res.exit_code == 0, res.output
    got = _load(out, "test")
    np.testing.assert_array_equal(np.stack([r["x"] for r in got]), np.arange(12).reshape(6, 2))


def test_gzip_shards_and_clashing_split_names_are_refused(tmp_path):
    rows = [{"v": np.int64(i)} for i in range(4)]
    with pytest.raises(ConvertError, match="--tfds-metadata.*--compression none"):
        convert(rows, tmp_path / "g", compression="gzip", tfds_metadata=True, progress=False)
    convert(rows, tmp_path / "o", split="a.b", progress=False)
    convert(rows, tmp_path / "o", split="a_b", progress=False)
    with pytest.raises(TfdsExportError, match="'a.b' and 'a_b'"):
        write_tfds_metadata(tmp_path / "o")
