"""data/sources/__init__.py's open_rows: the reader picked by a path's suffix, a folder or an
iterable, and what it cannot read named."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tfperf.data.convert.run import convert
from tfperf.data.sources import (
    CsvSource,
    ImageFolder,
    IterableSource,
    NpySource,
    NpzSource,
    SourceError,
    image_schema,
    open_rows,
)


def test_unknown_source_kind(tmp_path):
    (tmp_path / "x.xlsx").write_text("?")
    with pytest.raises(SourceError, match=r"unknown kind of source '.xlsx'"):
        convert(tmp_path / "x.xlsx", tmp_path / "o", progress=False)
    assert sys.modules["tfperf.data.convert.run"]


def test_the_reader_is_picked_by_the_suffix_or_kind(tmp_path):
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    np.save(tmp_path / "b.npy", np.arange(3))
    (tmp_path / "c.CSV").write_text("x\n1\n")
    (tmp_path / "imgs" / "cat").mkdir(parents=True)
    picked = {
        "a.npz": NpzSource,
        "b.npy": NpySource,
        "c.CSV": CsvSource,
    }
    for name, kind in picked.items():
        assert type(open_rows(tmp_path / name)) is kind, name
    assert isinstance(open_rows([{"x": 1}]), IterableSource)
    src = NpzSource(str(tmp_path / "a.npz"))
    assert open_rows(src) is src  # a reader is used as it is
    schema = image_schema((4, 6), 1)
    folder = open_rows(tmp_path / "imgs", schema=schema)  # the size from the schema
    assert isinstance(folder, ImageFolder) and (folder.size, folder.channels) == ((4, 6), 1)


@pytest.mark.parametrize(
    ("source", "kwargs", "problem"),
    [
        ("missing.npz", {}, "missing.npz: no such file or folder"),
        ("imgs", {}, "an image folder needs its image size: --image-size HxW"),
        ("a.npz", {"column_types": {"x": "int64"}}, "--column-types: applies to CSV files only"),
        ({"x": 1}, {}, "source: expected rows \\(an iterable of dicts\\), found one dict"),
        (42, {}, "source: expected a path or an iterable of dict rows, found 42"),
    ],
)
def test_what_cannot_be_read_is_named(tmp_path, source, kwargs, problem):
    (tmp_path / "imgs" / "cat").mkdir(parents=True)
    np.savez(tmp_path / "a.npz", x=np.arange(3))
    if isinstance(source, str):
        source = tmp_path / source
    with pytest.raises(SourceError, match=problem):
        open_rows(source, **kwargs)
