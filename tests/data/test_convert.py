"""convert on tiny real files: every source kind, schema inference, preprocessing, the
round trip through data/pipeline.py for every dtype, bad rows (stop or reject), GZIP,
several splits in one directory, built-in workload data, parallel workers, and an exact
resume after `kill -9`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tfperf.config import PipelineConfig
from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import load_manifest
from tfperf.data.pipeline import make_dataset
from tfperf.data.schema import Feature, Schema
from tfperf.data.shards import progress_name
from tfperf.data.sources import CsvSource, NpzSource, ParquetSource, SourceError
from tfperf.data.verify import read_records
from tfperf.inputs.workload_data import write_workload_data
from tfperf.workloads.base import Workload

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


# ---- round trips ---------------------------------------------------------------------
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


def test_npz_inference_and_values(tmp_path):
    n = 12
    arrays = {
        "x": np.random.default_rng(0).standard_normal((n, 3)).astype(np.float32),
        "img": np.arange(n * 4, dtype=np.uint8).reshape(n, 2, 2),
        "small": np.arange(n, dtype=np.int16),
        "d": np.linspace(0, 1, n),
        "flag": np.arange(n) % 2 == 0,
        "word": np.array([f"w{i}" for i in range(n)]),
    }
    np.savez(tmp_path / "data.npz", **arrays)
    schema = NpzSource(str(tmp_path / "data.npz")).infer_schema()
    table = {f.name: (f.dtype, f.shape) for f in schema.features}
    assert table == {
        "x": ("float32", (3,)),
        "img": ("uint8", (2, 2)),
        "small": ("int32", ()),
        "d": ("float64", ()),
        "flag": ("bool", ()),
        "word": ("bytes", ()),
    }
    m = convert(tmp_path / "data.npz", tmp_path / "out", workers=1, progress=False)
    assert m.name == "data" and m.splits["train"].shards[0].file.startswith("data-train.")
    got = read_back(tmp_path / "out")
    want = [{k: v[i] for k, v in arrays.items()} for i in range(n)]
    assert_rows_equal(got, want, schema)


def test_npy_is_one_feature_named_after_the_file(tmp_path):
    np.save(tmp_path / "pixels.npy", np.arange(30, dtype=np.int8).reshape(10, 3))
    m = convert(tmp_path / "pixels.npy", tmp_path / "out", workers=1, progress=False)
    assert m.schema.names == ["pixels"] and m.schema["pixels"].shape == (3,)
    got = read_back(tmp_path / "out")
    np.testing.assert_array_equal(
        np.stack([r["pixels"] for r in got]), np.arange(30).reshape(10, 3)
    )


def test_npz_arrays_of_different_lengths_are_named(tmp_path):
    np.savez(tmp_path / "bad.npz", a=np.zeros(3), b=np.zeros(4))
    with pytest.raises(SourceError, match=r"bad.npz: arrays differ in length.*'a': 3"):
        convert(tmp_path / "bad.npz", tmp_path / "out", progress=False)


def test_csv_inference_and_explicit_schema(tmp_path, cli):
    (tmp_path / "d.csv").write_text(
        "id,score,name,vec\n1,0.5,ann,1 2\n2,-3,bob,3 4\n3,7.25,7,5 6\n"
    )
    schema = CsvSource(str(tmp_path / "d.csv")).infer_schema()
    assert [(f.name, f.dtype) for f in schema.features] == [
        ("id", "int64"),
        ("score", "float32"),
        ("name", "bytes"),
        ("vec", "bytes"),
    ]
    declared = Schema.of(
        Feature(name="id", dtype="int32"),
        Feature(name="score", dtype="float64"),
        Feature(name="name", dtype="bytes"),
        Feature(name="vec", dtype="int64", shape=(2,)),
    )
    (tmp_path / "s.json").write_text(declared.model_dump_json())
    res = cli(
        "convert",
        tmp_path / "d.csv",
        "--out",
        tmp_path / "out",
        "--schema",
        tmp_path / "s.json",
        "--quiet",
        "--json",
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["records"] == 3 and summary["schema"][3]["shape"] == [2]
    got = read_back(tmp_path / "out")
    assert [r["id"].item() for r in got] == [1, 2, 3]
    assert [r["score"].item() for r in got] == [0.5, -3.0, 7.25]
    assert [r["name"].item() for r in got] == [b"ann", b"bob", b"7"]
    np.testing.assert_array_equal(np.stack([r["vec"] for r in got]), [[1, 2], [3, 4], [5, 6]])


def test_csv_bad_cell_stops_with_its_row(tmp_path, cli):
    (tmp_path / "d.csv").write_text("a,b\n1,2\n3,oops\n4,\n")
    (tmp_path / "s.yaml").write_text(
        "features:\n- {name: a, dtype: int64}\n- {name: b, dtype: float32}\n"
    )
    res = cli(
        "convert",
        tmp_path / "d.csv",
        "--out",
        tmp_path / "o",
        "--schema",
        tmp_path / "s.yaml",
        "--quiet",
        "--workers",
        "1",
    )
    assert res.exit_code == 2
    msg = " ".join(res.stderr.split())
    where = "d.csv: line 3 (counted from 1, the header is line 1), column 'b'"
    assert f"{where}: expected a number (float32), found 'oops'" in msg
    assert "Traceback" not in res.output
    res = cli(
        "convert",
        tmp_path / "d.csv",
        "--out",
        tmp_path / "o2",
        "--schema",
        tmp_path / "s.yaml",
        "--quiet",
        "--on-bad-row",
        "skip",
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rejected"] == 2
    lines = [
        json.loads(x)
        for x in (tmp_path / "o2" / "d-train.rejects.jsonl").read_text().split("\n")
        if x
    ]  # noqa: E501
    assert [(x["row"], x["line"]) for x in lines] == [(2, 3), (3, 4)]  # counted from 1
    assert "empty cell" in lines[1]["error"] and "oops" in lines[0]["repr"]


def test_parquet_fixed_and_varlen_lists(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "id": pa.array([0, 1, 2], pa.int64()),
            "x": pa.array([[1.5, 2.5], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float32())),
            "m": pa.array(
                [[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]],
                pa.list_(pa.list_(pa.int32())),
            ),
            "tokens": pa.array([[1], [2, 3, 4], []], pa.list_(pa.int64())),
            "text": pa.array(["a", "bb", "ccc"]),
            "u": pa.array([1, 2, 255], pa.uint8()),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet")
    schema = ParquetSource(str(tmp_path / "t.parquet")).infer_schema()
    got_table = {f.name: (f.dtype, f.shape, f.varlen) for f in schema.features}
    assert got_table == {
        "id": ("int64", (), False),
        "x": ("float32", (2,), False),
        "m": ("int32", (2, 2), False),
        "tokens": ("int64", (), True),
        "text": ("bytes", (), False),
        "u": ("uint8", (), False),
    }
    convert(tmp_path / "t.parquet", tmp_path / "out", workers=1, progress=False)
    got = read_back(tmp_path / "out")
    want = table.to_pylist()
    assert_rows_equal(got, want, schema)


def test_image_folder(tmp_path, cli):
    from PIL import Image

    root = tmp_path / "imgs"
    for label, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (root / label).mkdir(parents=True)
        for j, size in enumerate([(4, 4), (6, 8)]):  # (W, H): the second is resized
            Image.new("RGB", size, color).save(root / label / f"{j}.png")
    (root / "dog" / "notes.txt").write_text("not an image")
    res = cli("convert", root, "--out", tmp_path / "o", "--quiet")
    assert res.exit_code == 2 and "--image-size" in res.stderr
    res = cli("convert", root, "--out", tmp_path / "o", "--image-size", "4x4", "--quiet")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o" / "labels.txt").read_text().split() == ["cat", "dog"]
    got = read_back(tmp_path / "o")
    assert sorted(r["label"].item() for r in got) == [0, 0, 1, 1]  # in a shuffled order
    assert all(r["image"].shape == (4, 4, 3) and r["image"].dtype == np.uint8 for r in got)
    color = {r["label"].item(): r["image"][2, 2].tolist() for r in got}
    assert color == {0: [255, 0, 0], 1: [0, 0, 255]}
    # a broken image file is a bad row named with its path
    (root / "cat" / "2.png").write_bytes(b"not a png")
    m = convert(root, tmp_path / "o2", image_size=(4, 4), on_bad_row="skip", progress=False)
    assert m.splits["train"].rejected == 1
    assert "2.png" in (tmp_path / "o2" / m.splits["train"].rejects_file).read_text()


# ---- preprocessing ---------------------------------------------------------------------
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


def test_cli_preprocess_module_function_with_output_schema(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prep_mod_a.py").write_text(
        "import numpy as np\n"
        "def heavy(row):\n    return {'y': np.float64(row['x'].sum()), 'n': row['x'].size}\n"
    )
    feats = [{"name": "y", "dtype": "float64"}, {"name": "n", "dtype": "int32"}]
    (tmp_path / "out_schema.json").write_text(json.dumps({"features": feats}))
    np.savez(tmp_path / "d.npz", x=np.ones((5, 3)))
    res = cli(
        "convert",
        "d.npz",
        "--out",
        "o",
        "--preprocess",
        "prep_mod_a:heavy",
        "--schema",
        "out_schema.json",
        "--quiet",
        "--workers",
        "1",
    )
    assert res.exit_code == 0, res.output
    got = read_back(tmp_path / "o")
    assert [(r["y"].item(), r["n"].item()) for r in got] == [(3.0, 3)] * 5
    assert got[0]["n"].dtype == np.int32
    res = cli("convert", "d.npz", "--out", "o3", "--preprocess", "prep_mod_a:nope")
    assert res.exit_code == 2 and "has no attribute 'nope'" in res.stderr


# ---- bad rows ------------------------------------------------------------------------------
def test_bad_row_stops_keeps_finished_shards_then_skip_rejects(tmp_path, cli):
    x = np.arange(80, dtype=np.float32).reshape(40, 2)
    x[25, 1] = np.nan
    np.savez(tmp_path / "d.npz", x=x)
    res = cli(
        "convert",
        tmp_path / "d.npz",
        "--out",
        tmp_path / "o",
        "--shard-size",
        "300",
        "--workers",
        "1",
        "--quiet",
    )
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
    res = cli(
        "convert",
        tmp_path / "d.npz",
        "--out",
        tmp_path / "o",
        "--shard-size",
        "300",
        "--on-bad-row",
        "skip",
        "--quiet",
        "--json",
        "--workers",
        "1",
    )
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


# ---- compression, splits, options ------------------------------------------------------
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


def test_max_examples_name_and_json(tmp_path, cli):
    np.savez(tmp_path / "d.npz", x=np.arange(100))
    res = cli(
        "convert",
        tmp_path / "d.npz",
        "--out",
        tmp_path / "o",
        "--max-examples",
        "7",
        "--name",
        "tiny",
        "--split",
        "dev",
        "--json",
        "--quiet",
    )
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert (s["name"], s["split"], s["records"], s["shards"]) == ("tiny", "dev", 7, 1)
    assert (tmp_path / "o" / "tiny-dev.tfrecord-00000-of-00001").exists()
    for bad in (
        ["--shard-size", "lots"],
        ["--compression", "zip"],
        ["--on-bad-row", "ignore"],
        ["--workers", "0"],
    ):
        res = cli("convert", tmp_path / "d.npz", "--out", tmp_path / "o2", "--quiet", *bad)
        assert res.exit_code == 2 and bad[0] in res.stderr, (bad, res.output)


def test_convert_help_explains_every_option(cli):
    res = cli("convert", "--help")
    for opt in (
        "--schema",
        "--preprocess",
        "--shard-size",
        "--workers",
        "--compression",
        "--resume",
        "--on-bad-row",
        "--max-examples",
        "--split",
        "--name",
        "--out",
        "--json",
        "--quiet",
        "--workload",
        "--image-size",
    ):
        assert opt in res.stdout


# ---- built-in workload data -----------------------------------------------------------------
def _scale(row: dict) -> dict:
    return {"x": row["x"] * 10, "y": row["y"]}


class TinyWorkload(Workload):
    name = "tiny"
    original_needs_raw = True

    def raw_schema(self) -> Schema:
        return Schema.of(
            Feature(name="x", dtype="float32", shape=(2,)), Feature(name="y", dtype="int64")
        )

    def schema(self) -> Schema:
        return Schema.of(
            Feature(name="x", dtype="float32", shape=(2,), storage="bytes"),
            Feature(name="y", dtype="int64"),
        )

    def generate(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        for i in range(n):
            yield {"x": rng.random(2, dtype=np.float32), "y": i}

    def offline_preprocess(self):
        return _scale


def test_write_workload_data_splits_and_schemas(tmp_path):
    wl = TinyWorkload()
    m = write_workload_data(
        wl, tmp_path / "d", examples=20, eval_examples=6, seed=3, progress=False, workers=1
    )
    assert {k: v.records for k, v in m.splits.items()} == {
        "train": 20,
        "eval": 6,
        "train_raw": 20,
        "eval_raw": 6,
    }
    assert m.workload == "tiny" and m.schema == wl.schema()
    assert m.split_schema("train_raw") == wl.raw_schema() and m.split_schema("eval") == wl.schema()
    raw = [r["x"] for r in wl.generate(20, 3)]
    tuned = read_back(tmp_path / "d", "train")
    np.testing.assert_allclose(np.stack([r["x"] for r in tuned]), np.stack(raw) * 10)
    raw_back = read_back(tmp_path / "d", "train_raw")
    np.testing.assert_array_equal(np.stack([r["x"] for r in raw_back]), np.stack(raw))
    evals = np.stack([r["x"] for r in read_back(tmp_path / "d", "eval_raw")])
    assert not np.isin(evals, np.stack(raw)).any()  # eval rows are not training rows
    again = write_workload_data(
        wl, tmp_path / "d2", examples=20, eval_examples=6, seed=3, progress=False, workers=1
    )
    assert again.splits == m.splits  # deterministic: same bytes, same sha256


def test_convert_builtin_workload_cli(tmp_path, cli):
    from tfperf.workloads import get_workload

    try:
        get_workload("regression")
    except (ImportError, AttributeError):
        pytest.skip("the regression workload is not available")
    res = cli(
        "convert",
        "--workload",
        "regression",
        "--out",
        tmp_path / "d",
        "--examples",
        "40",
        "--eval-examples",
        "8",
        "--quiet",
        "--json",
        "--workers",
        "1",
    )
    assert res.exit_code == 0, res.output
    m = load_manifest(tmp_path / "d")
    assert m.splits["train"].records == 40 and m.splits["eval"].records == 8


# ---- parallel workers and resume ----------------------------------------------------------
def test_parallel_workers_write_the_same_shards(tmp_path):
    np.savez(
        tmp_path / "d.npz",
        x=np.random.default_rng(1).random((300, 8)).astype(np.float32),
        y=np.arange(300),
    )
    m1 = convert(tmp_path / "d.npz", tmp_path / "one", shard_bytes=4000, workers=1, progress=False)
    m2 = convert(tmp_path / "d.npz", tmp_path / "two", shard_bytes=4000, workers=2, progress=False)
    assert len(m1.splits["train"].shards) > 4
    assert m1.splits == m2.splits
    assert shard_bytes_of(tmp_path / "one") == shard_bytes_of(tmp_path / "two")


SLOW_MODULE = """
import time
def slow(row):
    time.sleep(0.01)
    return row
"""


def test_kill_9_then_resume_is_exact(tmp_path, tfperf_exe):
    rng = np.random.default_rng(7)
    np.savez(
        tmp_path / "d.npz", x=rng.standard_normal((400, 16)).astype(np.float32), id=np.arange(400)
    )
    (tmp_path / "slowmod.py").write_text(SLOW_MODULE)
    args = [
        tfperf_exe,
        "convert",
        "d.npz",
        "--out",
        "crashed",
        "--preprocess",
        "slowmod:slow",
        "--shard-size",
        "1KiB",
        "--workers",
        "2",
        "--quiet",
    ]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    progress = tmp_path / "crashed" / progress_name("d", "train")
    done, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if progress.exists():
            done = len(json.loads(progress.read_text())["shards"])
            if done >= 1:
                break
        time.sleep(0.02)
    assert proc.poll() is None, f"convert ended before it could be killed: {proc.stderr.read()}"
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its worker processes
    proc.wait()
    state = json.loads(progress.read_text())
    total = len(state["plan"]["bounds"]) - 1
    assert 1 <= len(state["shards"]) < total  # killed midway
    assert not (tmp_path / "crashed" / "manifest.json").exists()
    res = subprocess.run(
        [*args, "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr
    # the uninterrupted reference run (same rows: the preprocess is the identity)
    ref = convert(tmp_path / "d.npz", tmp_path / "ref", shard_bytes=1024, workers=1, progress=False)
    got = load_manifest(tmp_path / "crashed")
    assert len(ref.splits["train"].shards) == total
    assert got.splits["train"].shards == ref.splits["train"].shards
    assert got.splits["train"].records == 400
    assert shard_bytes_of(tmp_path / "crashed") == shard_bytes_of(tmp_path / "ref")
    ids = [r["id"].item() for r in read_back(tmp_path / "crashed")]
    assert ids == list(range(400))  # none lost, none duplicated
    leftovers = [p.name for p in (tmp_path / "crashed").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_resume_checks_options_and_finished_splits(tmp_path):
    np.savez(tmp_path / "d.npz", x=np.arange(50))
    convert(tmp_path / "d.npz", tmp_path / "o", shard_bytes=200, workers=1, progress=False)
    before = shard_bytes_of(tmp_path / "o")
    # resuming a finished split verifies it and changes nothing
    m = convert(
        tmp_path / "d.npz", tmp_path / "o", shard_bytes=200, workers=1, progress=False, resume=True
    )
    assert shard_bytes_of(tmp_path / "o") == before and m.splits["train"].records == 50
    # a damaged shard of a finished split is rewritten by --resume
    victim = sorted((tmp_path / "o").glob("d-train.tfrecord-*"))[1]
    victim.write_bytes(victim.read_bytes()[:-3])
    convert(
        tmp_path / "d.npz", tmp_path / "o", shard_bytes=200, workers=1, progress=False, resume=True
    )
    assert shard_bytes_of(tmp_path / "o") == before
    # an interrupted run can only be resumed with the same options
    progress = tmp_path / "o" / progress_name("d", "train")
    state = {
        "format": "tfperf.progress/1",
        "plan": {"num_rows": 50, "records_per_shard": 50, "bounds": [0, 50]},
        "shards": {},
        "fingerprint": {"source": "elsewhere.npz", "rows": 50},
    }
    progress.write_text(json.dumps(state))
    with pytest.raises(ConvertError, match="cannot resume: source, schema"):
        convert(tmp_path / "d.npz", tmp_path / "o", workers=1, progress=False, resume=True)


def test_records_are_framed_like_tensorflow_writes_them(tmp_path):
    import tensorflow as tf

    rows = [{"v": np.int64(i)} for i in range(5)]
    convert(rows, tmp_path / "o", workers=1, progress=False)
    ours = next((tmp_path / "o").glob("data-train.tfrecord-*"))
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as w:
        for _, data in read_records(ours):
            w.write(data)
    assert (tmp_path / "tf.tfrecord").read_bytes() == ours.read_bytes()


def test_unknown_source_kind(tmp_path):
    (tmp_path / "x.xlsx").write_text("?")
    with pytest.raises(SourceError, match=r"unknown kind of source '.xlsx'"):
        convert(tmp_path / "x.xlsx", tmp_path / "o", progress=False)
    assert sys.modules["tfperf.data.convert.run"]


def test_unpicklable_preprocess_runs_in_this_process(tmp_path):
    offset = 5

    def closure(row: dict) -> dict:  # a local function cannot be sent to worker processes
        return {"v": row["v"] + offset}

    rows = [{"v": np.int64(i)} for i in range(30)]
    m = convert(
        rows, tmp_path / "o", preprocess=closure, shard_bytes=100, workers=2, progress=False
    )
    assert len(m.splits["train"].shards) > 1
    assert [r["v"].item() for r in read_back(tmp_path / "o")] == list(range(5, 35))


# ---- a built-in workload whose offline step is a closure (distance maps) -----------------------
def test_offline_preprocess_ref_rebuilds_built_in_workloads_only():
    from tfperf.data.convert.options import load_preprocess
    from tfperf.inputs.workload_data import offline_preprocess_ref
    from tfperf.workloads import get_workload

    wl = get_workload("distance_maps", image_size=16, max_clicks=2)
    ref = offline_preprocess_ref(wl)
    assert (ref.factory, ref.kwargs) == (
        "tfperf.inputs.workload_data:workload_offline_step",
        {"name": "distance_maps", "options": wl.options},
    )
    row = next(wl.generate(1, seed=4))
    rebuilt = load_preprocess(ref)(row)  # what a worker process computes
    np.testing.assert_array_equal(rebuilt["dist"], wl.offline_preprocess()(row)["dist"])
    assert offline_preprocess_ref(TinyWorkload()) is _scale  # not built in: the function


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_convert_distance_maps_workload_cli(tmp_path, cli, workers):
    from tfperf.workloads.distance_maps import distance_maps

    out = tmp_path / "d"
    # Small shards so that several workers get work.
    res = cli(
        "convert",
        "--workload",
        "distance_maps",
        "--examples",
        "64",
        "--eval-examples",
        "16",
        "--out",
        out,
        "--workers",
        str(workers),
        "--shard-size",
        "64KiB",
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert "in this process" not in res.output  # the workers did the work
    m = load_manifest(out)
    assert {k: v.records for k, v in m.splits.items()} == {
        "train": 64,
        "eval": 16,
        "train_raw": 64,
        "eval_raw": 16,
    }
    assert len(m.splits["train"].shards) > workers
    assert m.preprocess.startswith("workload distance_maps: offline_preprocess(")
    for split in ("train", "eval"):
        raw, tuned = read_back(out, f"{split}_raw"), read_back(out, split)
        for r, t in zip(raw, tuned, strict=True):
            np.testing.assert_array_equal(t["image"], r["image"])
            np.testing.assert_array_equal(t["dist"], distance_maps(r["clicks"], 64))
