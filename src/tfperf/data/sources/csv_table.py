"""CSV source: a file with a header row of names. Columns are typed from a sample of rows
(a column whose cells are mostly numbers is numeric; the rest of its cells are bad rows) or
as declared (`column_types`, --column-types); a cell that does not parse and a row with the
wrong number of cells are reported by their line and column, as BadValues."""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tfperf.data.schema import Feature, RowError, Schema
from tfperf.data.sources.base import BadValue, Row, RowSource, SourceError
from tfperf.data.sources.csv_records import CsvFormatError, CsvIndex, Record, records, scan
from tfperf.util.format import quoted

_INT_RE = re.compile(r"\s*[-+]?\d+\s*")
SAMPLE_ROWS = 10_000  # rows whose cells decide each column's type
LINES_FROM_1 = "counted from 1, the header is line 1"


class CsvSource(RowSource):
    """A CSV file with a header row; cells are read as text, then typed per column."""

    item = "column"

    def __init__(
        self, path: str, schema: Schema | None = None, column_types: Mapping[str, str] | None = None
    ):
        super().__init__(path)
        self.schema = schema  # how to type the columns; None: inferred
        self.column_types = dict(column_types or {})  # dtypes declared for some columns
        self.index: CsvIndex | None = None  # sent to worker processes: they need not scan
        self.inferred: Schema | None = None  # likewise: workers need not sample again
        self.typed_like: str | None = None  # the folder whose dataset's types `schema` is

    def _scanned(self) -> CsvIndex:
        if self.index is None:
            try:
                self.index, self._sample = scan(self.path, SAMPLE_ROWS)
            except CsvFormatError as exc:
                raise SourceError(f"{self.path}: {exc}") from None
            except OSError as exc:
                raise SourceError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        return self.index

    def __len__(self) -> int:
        return self._scanned().rows

    def infer_schema(self) -> Schema:
        if self.inferred is None:
            names = self._scanned().names
            rows = [r for r in self._sample_records() if r.cells and len(r.cells) == len(names)]
            feats = []
            for j, name in enumerate(names):
                cells = [(r.line, r.cells[j]) for r in rows if r.cells]
                feats.append(Feature(name=name, dtype=self._infer_dtype(name, cells)))
            schema = Schema(features=tuple(feats))
            self.inferred = schema.with_dtypes(self.column_types)
        return self.inferred

    def _sample_records(self) -> list[Record]:
        if getattr(self, "_sample", None) is None:
            self.index = None  # a worker without the sample: scan again (rare: inference)
            self._scanned()
        return self._sample

    def _infer_dtype(self, name: str, cells: list[tuple[int, str]]) -> str:
        """int64 or float32 when most non-empty sampled cells are such numbers (a note names
        the first that is not), else bytes."""
        texts = [(line, c) for line, c in cells if c.strip()]
        numbers = [(line, c) for line, c in texts if _is_float(c)]
        if not texts or 2 * len(numbers) <= len(texts):
            return "bytes"
        dtype = "int64" if all(_INT_RE.fullmatch(c) for _, c in numbers) else "float32"
        others = [(line, c) for line, c in texts if not _is_float(c)]
        if others and name not in self.column_types:
            line, text = others[0]
            self.notes.append(
                f"{self.path}: column '{name}' is typed {dtype}: {len(numbers)} of "
                f"{len(texts)} sampled cells are numbers; the others (first: {quoted(text)} on "
                f"line {line}) are bad rows. To keep it as text: --column-types {name}=bytes"
            )
        return dtype

    def adopt(self, schema: Schema, folder: str) -> bool:
        """Types the columns as `schema`, the dataset already in `folder`, when it has
        exactly these columns and none were declared: typing from a sample is a guess (an
        eval file whose floats happen to be whole would be int64). True when adopted."""
        if self.schema is not None or self.column_types:
            return False
        if schema.names != self._scanned().names:
            return False
        self.schema, self.typed_like = schema, folder
        return True

    def _row_schema(self) -> Schema:
        return self.schema or self.infer_schema()

    def line_of(self, index: int) -> int | None:
        lines = getattr(self, "_lines", None)
        if lines is not None and self._lines_start <= index < self._lines_start + len(lines):
            return lines[index - self._lines_start]
        offset, line, i = self._scanned().start_of(index)  # not among the rows just read
        with open(self.path, "rb") as f:
            f.seek(offset)
            for _, rec in records(f, line):
                if i == index:
                    return rec.line
                i += 1
        return None

    def locate(self, index: int) -> str:
        return f"line {self.line_of(index)} ({LINES_FROM_1})"

    def _hint(self, name: str) -> str | None:
        """How to fix a cell of column `name` that does not parse, when its type was not
        the user's choice."""
        if self.typed_like is not None:
            return (
                f"the column is typed as in the dataset already in {self.typed_like}; to "
                f"change its type, declare --column-types {name}=bytes (or another) and add "
                f"--overwrite"
            )
        if self.schema is not None or name in self.column_types:
            return None  # declared: the user knows the type
        return f"to keep column '{name}' as text, declare --column-types {name}=bytes"

    def read(self, start: int, stop: int) -> Iterator[Row]:
        index, schema = self._scanned(), self._row_schema()
        if start >= stop:
            return
        # One converter per typed column; bytes columns and unknown names stay text.
        typed = [
            (n, _converter(schema[n], self._hint(n)))
            for n in index.names
            if n in schema and schema[n].dtype != "bytes"
        ]
        offset, line, i = index.start_of(start)
        # The lines of the rows being read: messages about them name their lines.
        lines = self._lines = array("q")
        self._lines_start = start
        with open(self.path, "rb") as f:
            f.seek(offset)
            for _, rec in records(f, line):
                if i >= stop:
                    break
                if i >= start:
                    lines.append(rec.line)
                    yield _typed(rec, index.names, typed)
                i += 1


def _typed(rec: Record, names: list[str], typed: list[tuple[str, Callable[[str], Any]]]) -> Row:
    """A record as a row of typed cells; an unreadable or ragged record as one BadValue."""
    if rec.cells is None:
        return {RowError.WHOLE_ROW: BadValue(rec.expected, rec.found)}
    if len(rec.cells) != len(names):
        found = f"{len(rec.cells)}: {quoted(rec.cells)}"
        return {RowError.WHOLE_ROW: BadValue(f"{len(names)} cells (one per header column)", found)}
    row: Row = dict(zip(names, rec.cells, strict=True))
    for name, convert in typed:
        row[name] = convert(row[name])
    return row


def _converter(f: Feature, hint: str | None) -> Callable[[str], Any]:
    """Cell text -> f's value, None for an empty cell, else a BadValue (with `hint`)."""
    if f.shape or f.varlen or f.dtype == "bool":
        return lambda text: _csv_cell(text, f, hint)
    parse = int if f.dtype.startswith(("int", "uint")) else float  # both ignore spaces

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError:
            if not text.strip():
                return None  # an empty cell: the writer reports it as a missing value
            return BadValue(f"a number ({f.dtype})", quoted(text), hint)

    return convert


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_cell(text: str, f: Feature | None, hint: str | None = None) -> Any:
    """Text -> the feature's value; text that does not parse becomes a BadValue."""
    if f is None or f.dtype == "bytes":
        return text
    if text.strip() == "":
        return None  # an empty cell: the writer reports it as a missing value
    if f.shape or f.varlen:
        parts = [p for p in re.split(r"[\s,]+", text.strip().strip("[]")) if p]
        vals = [_number(p, f.dtype) for p in parts]
        if any(isinstance(v, str) for v in vals):
            return BadValue(f"numbers ({f.dtype}) separated by spaces", quoted(text), hint)
        return vals
    value = _number(text, f.dtype)
    if isinstance(value, str):
        return BadValue(f"a number ({f.dtype})", quoted(text), hint)
    return value


def _number(text: str, dtype: str) -> Any:
    t = text.strip()
    try:
        if dtype == "bool":
            low = t.lower()
            if low in ("true", "false"):
                return low == "true"
            return int(t)
        if dtype.startswith(("int", "uint")):
            return int(t)
        return float(t)
    except ValueError:
        return text
