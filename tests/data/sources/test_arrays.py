"""data/sources/arrays.py: an .npz (each array a feature, dtypes kept or widened, strings as
bytes) and a single .npy (one feature named after the file), inferred and converted, and
arrays of different lengths named."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.data.convert.run import convert
from tfperf.data.sources import NpzSource, SourceError

from helpers.convertkit import assert_rows_equal, read_back


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
