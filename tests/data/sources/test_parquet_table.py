"""data/sources/parquet_table.py: Parquet columns keep their types, fixed-length lists become
shapes and ragged lists varlen features, read back equal."""

from __future__ import annotations

from tfperf.data.convert.run import convert
from tfperf.data.sources import ParquetSource

from helpers.convertkit import assert_rows_equal, read_back


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
