"""Iterable source (API only): any iterable of dict rows, iterated once, in order, by the
main process; its schema is inferred from the first row."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sized
from typing import Any

from tfperf.data.schema import Schema
from tfperf.data.sources.base import Row, RowSource, SourceError, infer_schema_from_row


class IterableSource(RowSource):
    """Any iterable of dict rows (API only); iterated once, in order, by the main process.

    Without len() the rows are read into memory first (the plan needs the count).
    """

    random_access = False

    def __init__(
        self,
        rows: Iterable[Mapping[str, Any]],
        length: int | None = None,
        label: str = "<rows>",
    ):
        super().__init__(label)
        if length is None:
            if not isinstance(rows, Sized):  # a generator: its rows are read here once
                rows = list(rows)
            length = len(rows)
        self._rows = rows
        self._length = int(length)
        self._head: list[Any] = []

    @property
    def default_name(self) -> str:
        return "data"

    def __len__(self) -> int:
        return self._length

    def peek(self, n: int) -> list[Row]:
        """The first n rows, kept so that `iterate` still yields them."""
        if len(self._head) < n:
            if not hasattr(self, "_it"):
                self._it = iter(self._rows)
            self._head.extend(itertools.islice(self._it, n - len(self._head)))
        # A row that is no dict is returned as it is: inference and the writer name it.
        return [dict(r) if isinstance(r, Mapping) else r for r in self._head[:n]]

    head = peek  # a one-pass iterable keeps its first rows for `iterate`

    def infer_schema(self) -> Schema:
        head = self.peek(1)
        if not head:
            raise SourceError("rows: empty; cannot infer a schema (give one)")
        return infer_schema_from_row(head[0], "rows: row 1")

    def iterate(self) -> Iterator[Row]:
        if not hasattr(self, "_it"):
            self._it = iter(self._rows)
        yield from itertools.chain(self._head, self._it)
        self._head = []

    def read(self, start: int, stop: int) -> Iterator[Row]:
        return itertools.islice(self.iterate(), start, stop)
