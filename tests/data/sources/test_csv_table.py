"""data/sources/csv_table.py: CSV columns are inferred (int64, float32, bytes) or follow an
explicit schema (shaped cells of numbers), typed from a sample of rows (a stray word does not
turn a numeric column into bytes) or declared with --column-types; a bad cell or a ragged row
is named by its line (counted from 1, the header is line 1) and column, or goes to the rejects
file with it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import load_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.data.sources import CsvSource

from helpers.convertkit import read_back


def _rejects(out, name="d"):
    text = (out / f"{name}-train.rejects.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_stray_word_keeps_the_column_numeric_and_is_named_by_line(tmp_path, cli):
    rows = "".join(f"{i},{i / 2}\n" for i in range(1, 9))
    (tmp_path / "d.csv").write_text("id,score\n" + rows + "9,oops\n10,5.5\n")
    schema = CsvSource(str(tmp_path / "d.csv")).infer_schema()
    assert [(f.name, f.dtype) for f in schema.features] == [("id", "int64"), ("score", "float32")]
    res = cli("convert", tmp_path / "d.csv", "--out", tmp_path / "o", "--quiet", "--workers", "1")
    assert res.exit_code == 2, res.output
    msg = " ".join(res.stderr.split())
    assert "d.csv: line 10 (counted from 1, the header is line 1), column 'score'" in msg, msg
    assert "expected a number (float32), found 'oops'" in msg
    assert "--column-types score=bytes" in msg  # how to keep the column as text
    res = cli(
        "convert", tmp_path / "d.csv", "--out", tmp_path / "o2", "--quiet", "--on-bad-row", "skip"
    )
    assert res.exit_code == 0, res.output
    (reject,) = _rejects(tmp_path / "o2")
    assert (reject["line"], reject["row"]) == (10, 9) and "'score'" in reject["error"]
    assert load_manifest(tmp_path / "o2").splits["train"].records == 9


def test_a_ragged_row_is_skipped_with_its_line_or_stops_naming_it(tmp_path, cli):
    # line 4 spans two lines (a quoted newline), so the ragged row is on line 6
    text = 'a,b\np,2\nq,4\n"x\ny",5\n6,7,8\nr,10\n'
    (tmp_path / "d.csv").write_text(text)
    m = convert(tmp_path / "d.csv", tmp_path / "o", on_bad_row="skip", workers=1, progress=False)
    assert m.splits["train"].records == 4 and m.splits["train"].rejected == 1
    (reject,) = _rejects(tmp_path / "o")
    assert reject["line"] == 6 and reject["row"] == 4
    assert "expected 2 cells (one per header column), found 3" in reject["error"]
    res = cli("convert", tmp_path / "d.csv", "--out", tmp_path / "o2", "--quiet")
    assert res.exit_code == 2, res.output
    msg = " ".join(res.stderr.split())
    assert "d.csv: line 6 (counted from 1, the header is line 1): expected 2 cells" in msg, msg
    assert "Traceback" not in res.output


def test_declared_column_types(tmp_path, cli):
    (tmp_path / "d.csv").write_text("zip,price,n\n02134,1.5,3\n10001,2,4\n")
    res = cli(
        "convert",
        tmp_path / "d.csv",
        "--out",
        tmp_path / "o",
        "--column-types",
        "zip=bytes, n=int32",
        "--quiet",
        "--json",
    )
    assert res.exit_code == 0, res.output
    got = {f["name"]: f["dtype"] for f in json.loads(res.stdout)["schema"]}
    assert got == {"zip": "bytes", "price": "float32", "n": "int32"}
    for bad, words in (
        ("zip=text", ["--column-types", "'text'", "int64", "bytes"]),
        ("nope=int64", ["--column-types", "'nope'", "zip, price, n"]),
        ("zip", ["--column-types", "NAME=DTYPE"]),
    ):
        res = cli("convert", tmp_path / "d.csv", "--out", tmp_path / "o2", "--column-types", bad)
        assert res.exit_code == 2, (bad, res.output)
        assert all(w in res.stderr for w in words), (bad, res.stderr)
    assert "--column-types" in cli("convert", "--help").stdout


def test_column_types_with_a_schema_is_refused(tmp_path):
    (tmp_path / "d.csv").write_text("a\n1\n")
    schema = CsvSource(str(tmp_path / "d.csv")).infer_schema()
    with pytest.raises(ConvertError, match="--column-types"):
        convert(tmp_path / "d.csv", tmp_path / "o", schema=schema, column_types={"a": "int32"})


def test_a_new_split_is_typed_as_the_dataset_in_the_folder(tmp_path, cli):
    (tmp_path / "train.csv").write_text("x,y\n1.5,0\n2,1\n")
    (tmp_path / "eval.csv").write_text("x,y\n3,1\n4,0\n")  # x alone would be int64
    out = tmp_path / "o"
    convert(tmp_path / "train.csv", out, name="d", workers=1, progress=False)
    m = convert(tmp_path / "eval.csv", out, name="d", split="eval", workers=1, progress=False)
    assert m.split_schema("eval") == m.schema and m.schema["x"].dtype == "float32"
    (tmp_path / "bad.csv").write_text("x,y\n3,1\nmissing,0\n")
    res = cli("convert", tmp_path / "bad.csv", "--out", out, "--split", "test", "--quiet")
    msg = " ".join(res.stderr.split())
    assert res.exit_code == 2 and "line 3 (counted from 1, the header is line 1)" in msg, msg
    assert f"typed as in the dataset already in {out}" in msg and "--overwrite" in msg


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


def test_a_wide_csv_converts_every_cell_of_every_column(tmp_path):
    # 3,000 columns of three types: a lookup by name that scans the columns made this
    # quadratic (10,000 columns took 148 s); the speed is in benchmarks/bench_convert_wide.py
    cols = 3000
    names = [f"c{j}" for j in range(cols)]
    rows = [
        [
            (j * 7 + i) if j % 3 == 0 else (j + i / 4) if j % 3 == 1 else f"t{i}_{j}"
            for j in range(cols)
        ]
        for i in range(4)
    ]
    text = ",".join(names) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows)
    (tmp_path / "w.csv").write_text(text)
    m = convert(tmp_path / "w.csv", tmp_path / "o", workers=1, progress=False)
    assert m.splits["train"].records == 4
    dtypes = [(f.name, f.dtype) for f in m.schema.features]
    assert dtypes == [(n, ("int64", "float32", "bytes")[j % 3]) for j, n in enumerate(names)]
    # The records read as protos: the real pipeline builds a parse graph of 3,000 features
    # (~20 s), which other tests of convert already read back.
    import tensorflow as tf

    paths = [str(p) for p in m.shard_paths(tmp_path / "o", "train")]
    protos = [tf.train.Example.FromString(r.numpy()) for r in tf.data.TFRecordDataset(paths)]
    for i, row in enumerate(rows):
        feature = protos[i].features.feature
        for j, name in enumerate(names):
            kind = ("int64_list", "float_list", "bytes_list")[j % 3]
            (value,) = getattr(feature[name], kind).value
            want = row[j].encode() if j % 3 == 2 else row[j]
            assert value == (np.float32(want) if j % 3 == 1 else want), (i, j)


def test_a_header_only_csv_is_refused_naming_the_file(tmp_path, cli):
    (tmp_path / "empty.csv").write_text("a,b,c\n\n")
    res = cli("convert", tmp_path / "empty.csv", "--out", tmp_path / "o", "--quiet")
    assert res.exit_code == 2, res.output
    msg = " ".join(res.stderr.split())
    assert f"{tmp_path / 'empty.csv'}: expected rows of values after the header" in msg, msg
    assert "found only the header (3 columns) and no rows" in msg
    assert "Traceback" not in res.output and not (tmp_path / "o" / "manifest.json").exists()


def test_a_huge_bad_cell_is_quoted_cut(tmp_path, cli):
    # a 50 MB cell was printed whole; 2 MB here says the same
    big = "z" * 2_000_000
    rows = "".join(f"{i},{i / 2}\n" for i in range(1, 9))
    (tmp_path / "d.csv").write_text("id,score\n" + rows + f"9,{big}\n")
    res = cli("convert", tmp_path / "d.csv", "--out", tmp_path / "o", "--quiet", "--workers", "1")
    assert res.exit_code == 2, res.output[:2000]
    msg = " ".join(res.stderr.split())
    assert "line 10 (counted from 1, the header is line 1), column 'score'" in msg
    assert "found 'zzzz" in msg and "zzz'... (1,999,800 characters cut)" in msg
    assert len(res.stderr) < 2000
    # a ragged row quotes its cells cut as well
    (tmp_path / "r.csv").write_text(f"a,b\n1,2\n3,4,{big}\n")
    res = cli("convert", tmp_path / "r.csv", "--out", tmp_path / "o2", "--quiet")
    assert res.exit_code == 2 and len(res.stderr) < 2000, res.stderr[:2000]
    assert "expected 2 cells (one per header column), found 3: ['3', '4', 'zz" in " ".join(
        res.stderr.split()
    )
    assert "characters cut)" in res.stderr
