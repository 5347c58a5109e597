"""data/convert/run.py: `convert` on tiny real rows, read back through data/pipeline.py: every
dtype round trips, a preprocess function's output schema is inferred, a bad row stops the
run (finished shards kept) or goes to the rejects file, GZIP shards, several splits in one
folder, and records framed as TensorFlow frames them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import load_manifest
from tfperf.data.shards import progress_name
from tfperf.data.verify import read_records

from helpers.convertkit import ALL, all_dtypes_row, assert_rows_equal, read_back


def test_round_trip_every_dtype_through_the_pipeline(tmp_path):
    rows = [all_dtypes_row(i) for i in range(23)]
    m = convert(rows, tmp_path / "out", schema=ALL, shard_bytes=1000, workers=1, progress=False)
    info = m.splits["train"]
    assert info.records == 23 and len(info.shards) > 2
    assert [s.first_row for s in info.shards] == sorted(s.first_row for s in info.shards)
    batched = read_back(tmp_path / "out")
    assert_rows_equal(batched, rows, ALL)
    # batched parse (one parse_example per batch) equals the per-example parse
    records = [d for s in info.shards for _, d in read_records(tmp_path / "out" / s.file)]
    for a, data in zip(batched, records, strict=True):
        one = ALL.parse_one(data)
        for k in ALL.names:
            np.testing.assert_array_equal(a[k], one[k].numpy(), err_msg=k)


def double_and_tag(row: dict) -> dict:
    return {"x2": np.asarray(row["x"]) * 2, "tag": b"pre"}


def test_preprocess_callable_output_schema_is_inferred(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.arange(8, dtype=np.float32).reshape(4, 2))
    m = convert(
        tmp_path / "d.npz", tmp_path / "o", preprocess=double_and_tag, workers=1, progress=False
    )
    assert m.schema.names == ["x2", "tag"] and m.schema["x2"].shape == (2,)
    assert m.preprocess == f"{__name__}:double_and_tag"
    got = read_back(tmp_path / "o")
    np.testing.assert_array_equal(np.stack([r["x2"] for r in got]), np.arange(8).reshape(4, 2) * 2)


def test_bad_row_stops_keeps_finished_shards_then_skip_rejects(tmp_path, cli):
    x = np.arange(80, dtype=np.float32).reshape(40, 2)
    x[25, 1] = np.nan
    np.savez(tmp_path / "d.npz", x=x)

    def convert_d(*extra):
        args = ["--out", tmp_path / "o", "--shard-size", "300", "--workers", "1", "--quiet"]
        return cli("convert", tmp_path / "d.npz", *args, *extra)

    res = convert_d()
    assert res.exit_code == 2
    msg = " ".join(res.stderr.split())
    assert "d.npz: row 26, feature 'x': expected finite floats, found nan at index [1]" in msg
    shards = sorted(p.name for p in (tmp_path / "o").glob("d-train.tfrecord-*"))
    progress = json.loads((tmp_path / "o" / progress_name("d", "train")).read_text())
    assert shards and len(shards) == len(progress["shards"])  # finished shards are kept
    assert all(s["first_row"] <= 25 for s in progress["shards"].values())
    assert (
        not list((tmp_path / "o").glob(".*.tmp-*")) and not (tmp_path / "o/manifest.json").exists()
    )
    res = convert_d("--on-bad-row", "skip", "--json")
    assert res.exit_code == 0, res.output
    m = load_manifest(tmp_path / "o")
    info = m.splits["train"]
    assert (info.records, info.rejected, info.rejects_file) == (39, 1, "d-train.rejects.jsonl")
    (reject,) = [
        json.loads(x) for x in (tmp_path / "o" / info.rejects_file).read_text().splitlines()
    ]
    assert reject["row"] == 26 and "finite floats" in reject["error"] and "nan" in reject["repr"]
    ids = [r["x"][0].item() for r in read_back(tmp_path / "o")]
    assert ids == [2.0 * i for i in range(40) if i != 25]  # nothing else dropped
    assert not (tmp_path / "o" / progress_name("d", "train")).exists()


def test_missing_field_from_iterable_names_row(tmp_path):
    rows = [{"a": 1, "b": 2.0}, {"a": 2, "b": 3.0}, {"a": 3}]
    with pytest.raises(ConvertError, match="row 3, feature 'b': expected a value"):  # from 1
        convert(rows, tmp_path / "o", workers=1, progress=False)


def test_gzip_shards_read_back_and_splits_accumulate(tmp_path):
    rows = [all_dtypes_row(i) for i in range(9)]
    convert(
        rows,
        tmp_path / "o",
        schema=ALL,
        compression="gzip",
        shard_bytes=700,
        workers=1,
        progress=False,
    )
    m = convert(
        rows[:4],
        tmp_path / "o",
        schema=ALL,
        split="eval",
        compression="gzip",
        workers=1,
        progress=False,
    )
    assert m.compression == "GZIP" and set(m.splits) == {"train", "eval"}
    first = next(iter((tmp_path / "o").glob("data-train.tfrecord-*"))).read_bytes()
    assert first[:2] == b"\x1f\x8b"  # gzip magic
    assert_rows_equal(read_back(tmp_path / "o", "train"), rows, ALL)
    assert_rows_equal(read_back(tmp_path / "o", "eval"), rows[:4], ALL)
    with pytest.raises(ConvertError, match="compression 'GZIP'"):
        convert(rows, tmp_path / "o", schema=ALL, split="test", progress=False)


def test_records_are_framed_like_tensorflow_writes_them(tmp_path):
    import tensorflow as tf

    rows = [{"v": np.int64(i)} for i in range(5)]
    convert(rows, tmp_path / "o", workers=1, progress=False)
    ours = next((tmp_path / "o").glob("data-train.tfrecord-*"))
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as w:
        for _, data in read_records(ours):
            w.write(data)
    assert (tmp_path / "tf.tfrecord").read_bytes() == ours.read_bytes()
