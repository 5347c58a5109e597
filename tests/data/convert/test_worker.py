"""data/convert/worker.py: one shard written by a worker: a --preprocess function that
raises is one paragraph and exit 2 (named with the row, counted from 1, and the exception,
in this process or a worker process); a preprocess result that is not a dict, a value the
reader could not read and an empty cell are named; a shard is written under a temporary
name, its bad rows set aside with their lines, and a source that ends early is an error."""

from __future__ import annotations

import json

import pytest

from tfperf.data.convert.run import PreprocessError
from tfperf.data.convert.worker import (
    ShardJob,
    ShardTask,
    apply_preprocess,
    check_read,
    encode_row,
    run_here,
)
from tfperf.data.schema import Feature, RowError, Schema
from tfperf.data.sources import BadValue
from tfperf.data.verify import file_sha256, read_records
from tfperf.errors import UserError

from helpers.convertkit import one_paragraph


def test_preprocess_that_raises_on_every_row(data, cli):
    res = cli("convert", "d.npz", "--out", "o", "--preprocess", "boom_prep:always", "--quiet")
    msg = one_paragraph(res)
    assert "--preprocess boom_prep:always raised ValueError: cannot use this row" in msg, msg
    assert "row 1" in msg and "boom_prep.py, line 3" in msg
    assert issubclass(PreprocessError, UserError)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_preprocess_that_raises_on_one_row_names_it_from_1(data, cli, workers):
    args = ["--preprocess", "boom_prep:late", "--shard-size", "200", "--workers", workers]
    res = cli("convert", "d.npz", "--out", "o", "--quiet", *args)
    msg = one_paragraph(res)
    assert "d.npz: row 41: --preprocess boom_prep:late raised KeyError: 'label'" in msg, msg


SCHEMA = Schema.of(Feature(name="x", dtype="int64"))


def test_a_preprocess_result_that_is_not_a_dict_is_named():
    with pytest.raises(PreprocessError) as err:
        apply_preprocess(lambda row: [row["x"]], {"x": 1}, 4, "--preprocess m:f")
    assert str(err.value).startswith("row 5: --preprocess m:f returned list, expected a dict")
    assert apply_preprocess(None, {"x": 1}, 0) == {"x": 1}  # no function: the row as read

    def bad_row(row):
        raise RowError(0, "x", "a positive x", "-1")

    with pytest.raises(RowError):  # the row is bad, not the function
        apply_preprocess(bad_row, {"x": -1}, 0)


def test_values_the_reader_could_not_read_and_empty_cells_are_row_errors():
    with pytest.raises(RowError, match="row 3, feature 'x': expected a number, found 'oops'"):
        check_read({"x": BadValue("a number", "'oops'")}, 2)
    with pytest.raises(RowError, match="row 1, feature 'x': expected a value, found an empty"):
        encode_row(SCHEMA, {"x": None}, 0)
    with pytest.raises(RowError, match="expected a dict of features, found list"):
        encode_row(SCHEMA, [1], 0)
    assert encode_row(SCHEMA, {"x": 7}, 0) == SCHEMA.encode({"x": 7}, 0)


def _task(out, on_bad_row: str) -> ShardTask:
    return ShardTask(str(out), "rows", None, SCHEMA, None, "", on_bad_row)


def test_a_shard_with_bad_rows_set_aside(tmp_path):
    rows = [{"x": 1}, {"x": None}, {"x": 3}]
    results: list[dict] = []
    job = ShardJob(0, 10, 13, "d-train.tfrecord-00000-of-00001", "rejects-part", rows=rows)
    run_here(_task(tmp_path, "skip"), iter([job]), results.append, lambda n: None)
    (done,) = results
    assert (done["records"], done["rejected"], done["first_row"]) == (2, 1, 10)
    shard = tmp_path / job.file
    assert [SCHEMA.decode_numpy(d)["x"] for _, d in read_records(shard)] == [1, 3]
    assert (done["bytes"], done["sha256"]) == (shard.stat().st_size, file_sha256(shard)[0])
    (reject,) = [json.loads(x) for x in (tmp_path / "rejects-part").read_text().splitlines()]
    assert reject["row"] == 12 and "expected a value" in reject["error"]  # counted from 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d-train.tfrecord-00000-of-00001",
                                                          "rejects-part"]  # fmt: skip


def test_a_bad_row_or_a_short_source_is_an_error_and_leaves_no_shard(tmp_path):
    results: list[dict] = []
    stop = ShardJob(0, 0, 2, "a", "ra", rows=[{"x": 1}, {"x": None}])
    short = ShardJob(1, 2, 5, "b", "rb", rows=[{"x": 1}])
    run_here(_task(tmp_path, "error"), iter([stop, short]), results.append, lambda n: None)
    assert (
        results[0]["user"] and "rows: row 2, feature 'x': expected a value" in results[0]["error"]
    )
    assert "expected rows 3..5 (counted from 1), the source ended after 1" in results[1]["error"]
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []
