"""CSV source: a file with a header row of names, read as text and typed per feature, so
that a cell that does not parse is reported by row and feature (as a BadValue)."""

from __future__ import annotations

import csv
import re
from typing import Any

from tfperf.data.schema import Feature, Schema
from tfperf.data.sources.base import BadValue, SourceError, TableSource

_INT_RE = re.compile(r"\s*[-+]?\d+\s*")


class CsvSource(TableSource):
    """A CSV file with a header row; every cell is read as text, then typed per feature."""

    def _load(self) -> Any:
        # pyarrow is imported on first use: it is slow to import and only tables need it.
        import pyarrow.csv as pcsv

        try:
            with open(self.path, newline="") as f:
                header = f.readline()
            names = next(iter(csv.reader([header])), [])
            if not names:
                raise SourceError(f"{self.path}: empty file; expected a header row of names")
            # All text: typing happens per feature, so a bad cell is named by row.
            opts = pcsv.ConvertOptions(
                column_types={n: "string" for n in names}, strings_can_be_null=False
            )
            return pcsv.read_csv(self.path, convert_options=opts)
        except SourceError:
            raise
        except Exception as exc:
            raise SourceError(f"{self.path}: cannot read as CSV: {exc}") from None

    def infer_schema(self) -> Schema:
        feats = []
        for name in self.table.column_names:
            cells = [c for c in self.table.column(name).to_pylist() if c != ""]
            if cells and all(_INT_RE.fullmatch(c) for c in cells):
                dtype = "int64"
            elif cells and all(_is_float(c) for c in cells):
                dtype = "float32"
            else:
                dtype = "bytes"
            feats.append(Feature(name=name, dtype=dtype))
        return Schema(features=tuple(feats))

    def _columns(self, start: int, stop: int) -> dict[str, list[Any]]:
        schema = self._row_schema()
        out = {}
        for name in self.table.column_names:
            cells = self.table.column(name).slice(start, stop - start).to_pylist()
            f = schema[name] if name in schema.names else None
            out[name] = [_csv_cell(c, f) for c in cells]
        return out


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _csv_cell(text: str, f: Feature | None) -> Any:
    """Text -> the feature's value; text that does not parse stays text (validation names it)."""
    if f is None or f.dtype == "bytes":
        return text
    if text.strip() == "":
        return None  # an empty cell: the writer reports it as a missing value
    if f.shape or f.varlen:
        parts = [p for p in re.split(r"[\s,]+", text.strip().strip("[]")) if p]
        vals = [_number(p, f.dtype) for p in parts]
        if any(isinstance(v, str) for v in vals):
            return BadValue(f"numbers ({f.dtype}) separated by spaces", repr(text))
        return vals
    value = _number(text, f.dtype)
    return BadValue(f"a number ({f.dtype})", repr(text)) if isinstance(value, str) else value


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
