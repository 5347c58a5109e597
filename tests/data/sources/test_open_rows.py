"""data/sources/__init__.py's open_rows: the reader picked by a path's suffix, a folder or an
iterable, and what it cannot read named."""

from __future__ import annotations

import sys

import pytest

from tfperf.data.convert.run import convert
from tfperf.data.sources import SourceError


def test_unknown_source_kind(tmp_path):
    (tmp_path / "x.xlsx").write_text("?")
    with pytest.raises(SourceError, match=r"unknown kind of source '.xlsx'"):
        convert(tmp_path / "x.xlsx", tmp_path / "o", progress=False)
    assert sys.modules["tfperf.data.convert.run"]
