"""data/schema.py: feature declarations, row validation (each error names row, feature,
expected and found), Example encoding and decoding for every dtype, batched vs
per-example parsing."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.data.schema import Feature, RowError, Schema, SchemaError, schema_from_dict

ALL = Schema.of(
    Feature(name="f32", dtype="float32", shape=(2,)),
    Feature(name="f64", dtype="float64", shape=(2, 2)),
    Feature(name="i64", dtype="int64"),
    Feature(name="i32", dtype="int32", shape=(3,)),
    Feature(name="u8", dtype="uint8", shape=(2, 2, 3)),
    Feature(name="i8", dtype="int8", shape=(2,)),
    Feature(name="b", dtype="bool", shape=(2,)),
    Feature(name="s", dtype="bytes"),
    Feature(name="vi", dtype="int64", varlen=True),
    Feature(name="vf", dtype="float32", varlen=True),
)


def make_row(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {
        "f32": rng.standard_normal(2).astype(np.float32),
        "f64": rng.standard_normal((2, 2)),
        "i64": np.int64(2**40 + i),
        "i32": np.array([-(2**31), 2**31 - 1, i], np.int32),
        "u8": rng.integers(0, 256, (2, 2, 3)).astype(np.uint8),
        "i8": np.array([-128, 127], np.int8),
        "b": np.array([i % 2 == 0, True]),
        "s": f"row{i}".encode() * (i + 1),
        "vi": np.arange(i % 4, dtype=np.int64),
        "vf": np.linspace(0, 1, i % 3 + 1).astype(np.float32),
    }


def assert_row_equal(got: dict, want: dict) -> None:
    for k, v in want.items():
        if isinstance(v, bytes):
            assert got[k] == v, k
        else:
            g = np.asarray(got[k])
            assert g.dtype == np.asarray(v).dtype or k in ("vi",), (k, g.dtype)
            np.testing.assert_array_equal(g, v, err_msg=k)


def test_encode_decode_numpy_every_dtype():
    for i in range(4):
        row = make_row(i)
        assert_row_equal(ALL.decode_numpy(ALL.encode(row, i)), row)


def test_parse_batch_equals_parse_one_and_source():
    import tensorflow as tf

    rows = [make_row(i) for i in range(5)]
    serialized = tf.constant([ALL.encode(r) for r in rows])
    batch = ALL.parse_batch(serialized)
    for i, row in enumerate(rows):
        one = ALL.parse_one(serialized[i])
        for k in ALL.names:
            b = batch[k][i]
            b = b.numpy() if not hasattr(b, "to_list") else np.asarray(b.to_list())
            o = one[k].numpy()
            if k == "s":
                assert b == o == row[k]
            else:
                np.testing.assert_array_equal(b, o, err_msg=k)
                np.testing.assert_array_equal(o, row[k], err_msg=k)
                assert o.dtype == np.dtype(ALL[k].dtype), k


@pytest.mark.parametrize(
    ("row_update", "feature", "expected", "found"),
    [
        ({"f32": np.zeros(3, np.float32)}, "f32", "shape [2]", "shape [3]"),
        ({"f32": np.array([1.0, np.nan], np.float32)}, "f32", "finite floats", "nan"),
        ({"f64": np.full((2, 2), np.inf)}, "f64", "finite floats", "inf"),
        ({"i32": np.array([0, 2**31, 0])}, "i32", "values in", "range"),
        ({"u8": np.full((2, 2, 3), -1)}, "u8", "values in [0, 255]", "range"),
        ({"i64": 1.5}, "i64", "integers", "non-integer"),
        ({"b": np.array([0, 2])}, "b", "booleans", "values"),
        ({"s": 5}, "s", "bytes or str", "int"),
        ({"i64": "x"}, "i64", "numbers", "dtype"),
        ({"vi": np.zeros((2, 2), np.int64)}, "vi", "1-D list", "shape [2, 2]"),
    ],
)
def test_validate_row_names_the_problem(row_update, feature, expected, found):
    row = {**make_row(0), **row_update}
    with pytest.raises(RowError) as err:
        ALL.validate_row(row, 7)
    e = err.value
    assert (e.row, e.feature) == (7, feature)
    assert expected in e.expected and found in e.found
    assert str(e).startswith("row 8, feature")  # index 7: the 8th row, counted from 1


def test_missing_and_unknown_features():
    row = make_row(0)
    del row["s"]
    with pytest.raises(RowError, match="feature 's': expected a value"):
        ALL.validate_row(row, 1)
    with pytest.raises(RowError, match="feature 'extra': expected no such feature"):
        ALL.validate_row({**make_row(0), "extra": 1}, 1)


def test_scalars_given_as_one_element_lists_are_accepted():
    s = Schema.of(Feature(name="x", dtype="int64"), Feature(name="y", dtype="float32"))
    clean = s.validate_row({"x": [3], "y": 1.5})
    assert clean["x"].shape == () and clean["x"] == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "x", "dtype": "bool", "storage": "float"},
        {"name": "x", "dtype": "int64", "varlen": True, "shape": [2]},
        {"name": "x", "dtype": "bytes", "shape": [2]},
        {"name": "x", "dtype": "float32", "shape": [0]},
        {"name": "x", "dtype": "complex64"},
    ],
)
def test_bad_feature_declarations(bad):
    with pytest.raises(ValueError):
        Feature.model_validate(bad)


def test_schema_from_dict_and_duplicates():
    s = schema_from_dict([{"name": "a", "dtype": "int64"}, {"name": "b", "dtype": "bytes"}])
    assert s.names == ["a", "b"]
    assert schema_from_dict(s.model_dump(mode="json")) == s
    with pytest.raises(ValueError, match="duplicates"):
        schema_from_dict([{"name": "a", "dtype": "int64"}, {"name": "a", "dtype": "bytes"}])
    assert issubclass(SchemaError, ValueError)
