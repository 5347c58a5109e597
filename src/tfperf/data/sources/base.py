"""What every raw-data reader shares: the RowSource interface (rows by index), the BadValue
a reader leaves for the writer to report, the base of the table formats, and schema
inference from Python/numpy values. The formats themselves live in the sibling modules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.errors import UserError

Row = dict[str, Any]
# numpy kinds/dtypes -> the schema's dtypes; narrower types widen to an exact container.
_NP_DTYPES = {
    "float16": "float32",
    "float32": "float32",
    "float64": "float64",
    "int64": "int64",
    "int32": "int32",
    "int16": "int32",
    "int8": "int8",
    "uint8": "uint8",
    "uint16": "int32",
    "uint32": "int64",
    "bool": "bool",
}


class SourceError(UserError):
    """A source that cannot be read; the message names the file and what is wrong."""


def dtype_name(dtype: Any, where: str) -> str:
    """The schema dtype that holds numpy `dtype` exactly."""
    dt = np.dtype(dtype)
    if dt.kind in "SUO":
        return "bytes"
    if dt.name not in _NP_DTYPES:
        raise SourceError(
            f"{where}: dtype {dt.name} has no schema dtype; expected one of "
            f"{sorted(set(_NP_DTYPES))} or strings"
        )
    return _NP_DTYPES[dt.name]


def infer_feature(name: str, value: Any, where: str = "row") -> Feature:
    """A Feature that holds `value` (one example's value)."""
    if isinstance(value, (bytes, str, np.bytes_, np.str_)):
        return Feature(name=name, dtype="bytes")
    if isinstance(value, bool):
        return Feature(name=name, dtype="bool")
    if isinstance(value, int):
        return Feature(name=name, dtype="int64")
    if isinstance(value, float) and not isinstance(value, np.generic):  # np.float64 is a float
        return Feature(name=name, dtype="float32")  # Python floats: float32 (ML default)
    if value is None:
        raise SourceError(f"{where}: feature '{name}' is None; cannot infer its type")
    arr = np.asarray(value)
    if arr.dtype.kind == "f" and not isinstance(value, np.ndarray | np.generic):
        arr = arr.astype(np.float32)  # a list of Python floats: float32 as above
    if arr.dtype.kind in "SUO":
        if arr.ndim == 0:
            return Feature(name=name, dtype="bytes")
        raise SourceError(f"{where}: feature '{name}': arrays of strings are not supported")
    if 0 in arr.shape:
        raise SourceError(f"{where}: feature '{name}' is empty; give a schema (varlen)")
    return Feature(
        name=name,
        dtype=dtype_name(arr.dtype, f"{where}, feature '{name}'"),
        shape=tuple(int(d) for d in arr.shape),
    )


def infer_schema_from_row(row: Mapping[str, Any], where: str = "first row") -> Schema:
    if not isinstance(row, Mapping) or not row:
        raise SourceError(f"{where}: expected a dict of features, found {type(row).__name__}")
    return Schema(features=tuple(infer_feature(str(k), v, where) for k, v in row.items()))


class BadValue:
    """A value a reader could not make sense of; the writer reports it as a bad row (a
    `hint` says how to fix it)."""

    def __init__(self, expected: str, found: str, hint: str | None = None):
        self.expected, self.found, self.hint = expected, found, hint

    def __repr__(self) -> str:
        return f"<bad value: {self.found}>"


class RowSource:
    """Rows by index. `random_access` sources are read by workers themselves by range;
    others are iterated once by the main process."""

    random_access = True
    classes: list[str] | None = None  # class names (image folders)
    item = "feature"  # what messages call a row's fields ("column" in tables)
    shuffle_seed: int | None = None  # set when the rows are read in a seeded shuffled order

    def __init__(self, path: str):
        self.path = path
        self.notes: list[str] = []  # what the user should know about how it was read

    def line_of(self, index: int) -> int | None:
        """The line of the file where row `index` starts (text formats), else None."""
        return None

    def locate(self, index: int) -> str:
        """How messages name row `index`: counted from 1, as users count."""
        return f"row {index + 1}"

    @property
    def default_name(self) -> str:
        return Path(self.path).stem or "data"

    def __len__(self) -> int:
        raise NotImplementedError

    def infer_schema(self) -> Schema:
        raise NotImplementedError

    def read(self, start: int, stop: int) -> Iterator[Row]:
        raise NotImplementedError

    def iterate(self) -> Iterator[Row]:
        return self.read(0, len(self))

    def head(self, n: int) -> list[Row]:
        """The first n rows (to sample before writing); reading them again stays possible."""
        return list(self.read(0, n))

    def __getstate__(self) -> dict[str, Any]:
        # Loaded data stays behind: each worker process reopens the file.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


class TableSource(RowSource):
    """Shared by CSV and Parquet: a pyarrow Table read once per process."""

    item = "column"

    def __init__(self, path: str, schema: Schema | None = None):
        super().__init__(path)
        self.schema = schema  # how to type the columns; None: inferred

    def _load(self) -> Any:
        raise NotImplementedError

    @property
    def table(self) -> Any:
        if getattr(self, "_table", None) is None:
            self._table = self._load()
        return self._table

    def __len__(self) -> int:
        return self.table.num_rows

    def _row_schema(self) -> Schema:
        if getattr(self, "_schema", None) is None:
            self._schema = self.schema or self.infer_schema()
        return self._schema

    def _columns(self, start: int, stop: int) -> dict[str, list[Any]]:
        raise NotImplementedError

    def read(self, start: int, stop: int) -> Iterator[Row]:
        # Columns convert in chunks: fast columnar conversion, bounded memory.
        step = 1024
        for a in range(start, stop, step):
            b = min(stop, a + step)
            cols = self._columns(a, b)
            for i in range(b - a):
                yield {k: v[i] for k, v in cols.items()}
