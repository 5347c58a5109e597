"""data/sources/rows.py: any iterable of dict rows, iterated once in order: a generator is
read into memory to count it (or given its length), its first rows peeked at for the schema
and still yielded, and an empty one cannot be inferred."""

from __future__ import annotations

import pytest

from tfperf.data.sources.base import SourceError
from tfperf.data.sources.rows import IterableSource


def test_a_generator_is_counted_and_its_peeked_rows_are_still_yielded():
    src = IterableSource({"x": i} for i in range(4))
    assert len(src) == 4 and not src.random_access and src.default_name == "data"
    assert src.peek(2) == [{"x": 0}, {"x": 1}]
    assert [f.name for f in src.infer_schema().features] == ["x"]
    assert [r["x"] for r in src.iterate()] == [0, 1, 2, 3]


def test_a_given_length_keeps_the_rows_unread_until_iterated():
    pulled: list[int] = []

    def rows():
        for i in range(100):
            pulled.append(i)
            yield {"x": i}

    src = IterableSource(rows(), length=100, label="workload tiny")
    assert len(src) == 100 and pulled == []  # nothing read yet
    assert src.head(3) == [{"x": 0}, {"x": 1}, {"x": 2}] and pulled == [0, 1, 2]
    assert [r["x"] for r in src.read(1, 4)] == [1, 2, 3]  # one pass, rows 1..3
    assert src.path == "workload tiny"


def test_empty_rows_cannot_be_inferred():
    with pytest.raises(SourceError, match="rows: empty; cannot infer a schema"):
        IterableSource([]).infer_schema()
    with pytest.raises(SourceError, match="rows: row 1: expected a dict of features"):
        IterableSource([[1, 2]]).infer_schema()
