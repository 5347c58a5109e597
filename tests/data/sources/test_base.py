"""data/sources/base.py: schema inference from Python and numpy values (widened to a dtype
that holds them exactly, Python floats as float32), what cannot be inferred named, and the
row reader's defaults: rows counted from 1 in messages, a picklable reader without its
loaded data."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tfperf.data.sources.base import (
    BadValue,
    RowSource,
    SourceError,
    dtype_name,
    infer_feature,
    infer_schema_from_row,
)


@pytest.mark.parametrize(
    ("dtype", "name"),
    [("float16", "float32"), ("int16", "int32"), ("uint16", "int32"), ("uint32", "int64"),
     ("uint8", "uint8"), ("bool", "bool"), ("U5", "bytes"), ("S3", "bytes"), ("O", "bytes")],
)  # fmt: skip
def test_numpy_dtypes_widen_to_one_that_holds_them(dtype, name):
    assert dtype_name(np.dtype(dtype), "here") == name


def test_a_dtype_without_a_schema_dtype_is_named():
    with pytest.raises(SourceError, match="a.npz: dtype complex64 has no schema dtype"):
        dtype_name(np.complex64, "a.npz")
    with pytest.raises(SourceError, match="uint64"):
        dtype_name(np.uint64, "a.npz")


def test_features_inferred_from_values():
    row = {
        "n": 3,
        "f": 0.5,
        "flag": True,
        "word": "cat",
        "raw": b"\x00",
        "vec": [0.5, 1.5],  # Python floats: float32
        "img": np.zeros((2, 3), np.uint8),
        "d": np.float64(2.5),  # numpy keeps its dtype (np.float64 is a Python float too)
    }
    got = {f.name: (f.dtype, f.shape) for f in infer_schema_from_row(row).features}
    assert got == {
        "n": ("int64", ()),
        "f": ("float32", ()),
        "flag": ("bool", ()),
        "word": ("bytes", ()),
        "raw": ("bytes", ()),
        "vec": ("float32", (2,)),
        "img": ("uint8", (2, 3)),
        "d": ("float64", ()),
    }


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "feature 'v' is None; cannot infer its type"),
        ([], "feature 'v' is empty; give a schema"),
        (np.array(["a", "b"]), "feature 'v': arrays of strings are not supported"),
    ],
)
def test_values_that_say_nothing_of_their_type_are_named(value, problem):
    with pytest.raises(SourceError, match=f"row 3: {problem}"):
        infer_feature("v", value, "row 3")


def test_a_row_must_be_a_non_empty_dict():
    for row in ({}, [1, 2]):
        with pytest.raises(SourceError, match="first row: expected a dict of features"):
            infer_schema_from_row(row)


class Squares(RowSource):
    def __len__(self) -> int:
        return 5

    def read(self, start, stop):
        self._loaded = list(range(stop))  # data a worker process reloads itself
        return iter({"x": i * i} for i in range(start, stop))


def test_a_reader_counts_rows_from_1_and_pickles_without_its_data(tmp_path):
    src = Squares(str(tmp_path / "squares.bin"))
    assert src.locate(0) == "row 1" and src.line_of(0) is None
    assert src.default_name == "squares"
    assert [r["x"] for r in src.iterate()] == [0, 1, 4, 9, 16]
    assert src.head(2) == [{"x": 0}, {"x": 1}]
    copy = pickle.loads(pickle.dumps(src))
    assert copy.path == src.path and not hasattr(copy, "_loaded")
    assert repr(BadValue("a number", "'x'")) == "<bad value: 'x'>"
