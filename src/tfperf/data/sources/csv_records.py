"""CSV records with where they start: the byte offset and the line (counted from 1, as a text
editor counts; a quoted cell may span lines) of each record, and the one scan that indexes a
file so that worker processes seek straight to their rows instead of reading it all.
"""

from __future__ import annotations

import csv
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

BLOCK = 1024  # records between two index marks: a reader skips at most this many

# Long text cells (descriptions, JSON) are data, not errors: no per-cell size limit.
csv.field_size_limit(sys.maxsize)


@dataclass
class Record:
    """One CSV record: the line it starts on and its cells; None when it cannot be read,
    with what was `expected` and `found` instead."""

    line: int
    cells: list[str] | None
    expected: str = ""
    found: str = ""


def records(f: BinaryIO, line: int = 1) -> Iterator[tuple[int, Record]]:
    """(byte offset, record) of every non-blank record from `f`'s position, which is the
    start of line `line`."""
    # The reader pulls lines from here; counting their bytes and lines tells where each
    # record starts (f.tell() is not usable while iterating).
    pos, lines_read, bad_text = f.tell(), line - 1, False

    def lines() -> Iterator[str]:
        nonlocal pos, lines_read, bad_text
        for raw in f:
            pos += len(raw)
            lines_read += 1
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                bad_text = True
                yield raw.decode("utf-8", errors="replace")

    reader = csv.reader(lines())
    while True:
        offset, start, bad_text = pos, lines_read + 1, False
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield offset, Record(start, None, "a readable CSV record", str(exc))
            continue
        if not cells:
            continue  # a blank line is no record
        if bad_text:
            yield offset, Record(start, None, "UTF-8 text", "bytes that are not UTF-8")
            continue
        yield offset, Record(start, cells)


@dataclass
class CsvIndex:
    """A scanned CSV: its header, its number of rows and where every BLOCK-th row starts."""

    names: list[str]
    rows: int = 0
    marks: list[tuple[int, int]] = field(default_factory=list)  # (offset, line) of row k*BLOCK

    def start_of(self, row: int) -> tuple[int, int, int]:
        """(offset, line, index) of the marked row at or before `row`."""
        k = row // BLOCK
        offset, line = self.marks[k]
        return offset, line, k * BLOCK


class CsvFormatError(ValueError):
    """A file whose header cannot be used (the message says why; the caller adds the path)."""


def scan(path: str, sample_rows: int) -> tuple[CsvIndex, list[Record]]:
    """Reads the whole file once: its index and its first `sample_rows` records."""
    sample: list[Record] = []
    with open(path, "rb") as f:
        it = records(f)
        first = next(it, None)
        if first is None or first[1].cells is None:
            raise CsvFormatError("expected a header row of names, found no readable first line")
        names = [n.strip() for n in first[1].cells]
        names[0] = names[0].removeprefix("\ufeff")  # a byte-order mark is not part of a name
        _check_names(names)
        index = CsvIndex(names)
        for offset, rec in it:
            if index.rows % BLOCK == 0:
                index.marks.append((offset, rec.line))
            if index.rows < sample_rows:
                sample.append(rec)
            index.rows += 1
    if index.rows == 0:
        raise CsvFormatError(
            f"expected rows of values after the header, found only the header "
            f"({len(names):,} columns) and no rows; nothing to convert"
        )
    return index, sample


def _check_names(names: list[str]) -> None:
    empty = [i + 1 for i, n in enumerate(names) if not n]
    if empty:
        raise CsvFormatError(f"header column {empty[0]} has no name; name every column")
    dup = sorted(n for n, k in Counter(names).items() if k > 1)
    if dup:
        raise CsvFormatError(f"header names {dup} appear more than once; make them unique")
