"""Raw-data readers for `convert`: .npz/.npy, CSV, Parquet, a folder of images with one
subfolder per label, and any iterable of dict rows. Each yields plain dict rows (numpy
arrays, numbers, bytes) by row index and can infer a Schema; writing lives in writer.py.

Schema inference (used when no schema is given):
- .npz: one feature per array (first axis = rows), dtype kept (float16 -> float32, other
  ints widened to int32/int64), shape = the array's shape without the first axis;
  string arrays -> bytes. A single .npy is one feature named after the file.
- CSV (header = names): a column whose non-empty cells all parse as integers -> int64,
  as numbers -> float32, otherwise bytes. With an explicit schema, cells of a shaped or
  varlen feature hold numbers separated by spaces or commas (brackets are ignored).
- Parquet: int/float/bool columns keep their type (int16 -> int32, uint8 -> uint8, ...),
  string/binary -> bytes; list columns -> fixed shapes when every row has the same
  lengths, else a varlen 1-D feature.
- Image folder: `image` uint8 (H, W, C) of the declared size (images are resized to it)
  and `label` int64, the index of the subfolder in sorted order (the class names).
- Iterable of dicts: inferred from the first row (Python int -> int64, float -> float32,
  str/bytes -> bytes, numpy values keep their dtype).
Readers are picklable: worker processes reopen the file lazily and read their own rows.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.errors import UserError

Row = dict[str, Any]
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
# numpy kinds/dtypes -> the schema's dtypes; narrower types widen to an exact container.
_NP_DTYPES = {"float16": "float32", "float32": "float32", "float64": "float64",
              "int64": "int64", "int32": "int32", "int16": "int32", "int8": "int8",
              "uint8": "uint8", "uint16": "int32", "uint32": "int64", "bool": "bool"}  # fmt: skip


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
    if isinstance(value, float):
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
    return Feature(name=name, dtype=dtype_name(arr.dtype, f"{where}, feature '{name}'"),
                   shape=tuple(int(d) for d in arr.shape))  # fmt: skip


def infer_schema_from_row(row: Mapping[str, Any], where: str = "first row") -> Schema:
    if not isinstance(row, Mapping) or not row:
        raise SourceError(f"{where}: expected a dict of features, found {type(row).__name__}")
    return Schema(features=tuple(infer_feature(str(k), v, where) for k, v in row.items()))


class BadValue:
    """A value a reader could not make sense of; the writer reports it as a bad row."""

    def __init__(self, expected: str, found: str):
        self.expected, self.found = expected, found

    def __repr__(self) -> str:
        return f"<bad value: {self.found}>"


class RowSource:
    """Rows by index. `random_access` sources are read by workers themselves by range;
    others are iterated once by the main process."""

    random_access = True
    classes: list[str] | None = None  # class names (image folders)

    def __init__(self, path: str):
        self.path = path

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

    def __getstate__(self) -> dict[str, Any]:
        # Loaded data stays behind: each worker process reopens the file.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


class NpzSource(RowSource):
    """An .npz: each array is a feature; the first axis is the row."""

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if getattr(self, "_arrays", None) is None:
            try:
                with np.load(self.path, allow_pickle=False) as z:
                    arrays = {k: z[k] for k in z.files}
            except Exception as exc:
                raise SourceError(f"{self.path}: cannot read as .npz: {exc}") from None
            self._arrays = _check_arrays(arrays, self.path)
        return self._arrays

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values())))

    def infer_schema(self) -> Schema:
        feats = []
        for k, a in self.arrays.items():
            where = f"{self.path}: array '{k}'"
            feats.append(Feature(name=k, dtype=dtype_name(a.dtype, where), shape=a.shape[1:]))
        return Schema(features=tuple(feats))

    def read(self, start: int, stop: int) -> Iterator[Row]:
        chunks = {k: a[start:stop] for k, a in self.arrays.items()}
        for i in range(stop - start):
            yield {k: c[i] for k, c in chunks.items()}


class NpySource(NpzSource):
    """A single .npy: one feature named after the file; memory-mapped."""

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if getattr(self, "_arrays", None) is None:
            try:
                arr = np.load(self.path, mmap_mode="r", allow_pickle=False)
            except Exception as exc:
                raise SourceError(f"{self.path}: cannot read as .npy: {exc}") from None
            self._arrays = _check_arrays({self.default_name: arr}, self.path)
        return self._arrays


def _check_arrays(arrays: dict[str, np.ndarray], path: str) -> dict[str, np.ndarray]:
    if not arrays:
        raise SourceError(f"{path}: no arrays inside")
    lengths = {k: (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
    if None in lengths.values():
        k = next(k for k, v in lengths.items() if v is None)
        raise SourceError(f"{path}: array '{k}' is a scalar; expected rows on its first axis")
    if len(set(lengths.values())) > 1:
        raise SourceError(f"{path}: arrays differ in length (first axis): {lengths}")
    return arrays


class _TableSource(RowSource):
    """Shared by CSV and Parquet: a pyarrow Table read once per process."""

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


_INT_RE = re.compile(r"\s*[-+]?\d+\s*")


class CsvSource(_TableSource):
    """A CSV file with a header row; every cell is read as text, then typed per feature."""

    def _load(self) -> Any:
        import pyarrow.csv as pcsv

        try:
            with open(self.path, newline="") as f:
                header = f.readline()
            names = next(iter(__import__("csv").reader([header])), [])
            if not names:
                raise SourceError(f"{self.path}: empty file; expected a header row of names")
            # All text: typing happens per feature, so a bad cell is named by row.
            opts = pcsv.ConvertOptions(column_types={n: "string" for n in names},
                                       strings_can_be_null=False)  # fmt: skip
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


class ParquetSource(_TableSource):
    """A Parquet file; list columns hold fixed-shape or varlen arrays."""

    def _load(self) -> Any:
        import pyarrow.parquet as pq

        try:
            return pq.read_table(self.path)
        except Exception as exc:
            raise SourceError(f"{self.path}: cannot read as Parquet: {exc}") from None

    def infer_schema(self) -> Schema:
        import pyarrow as pa
        import pyarrow.compute as pc

        feats = []
        for name in self.table.column_names:
            col = self.table.column(name).combine_chunks()
            where = f"{self.path}: column '{name}'"
            shape: list[int] = []
            varlen = False
            t = col.type
            while (
                pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
            ):
                lengths = pc.unique(pc.list_value_length(col).drop_null()).to_pylist()
                if len(lengths) == 1 and lengths[0] > 0:
                    shape.append(int(lengths[0]))
                elif not shape and not pa.types.is_list(t.value_type):
                    varlen = True
                else:
                    raise SourceError(f"{where}: nested lists of varying length; give a schema")
                col, t = pc.list_flatten(col), t.value_type
            if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t):
                if shape or varlen:
                    raise SourceError(f"{where}: lists of strings are not supported")
                dtype = "bytes"
            else:
                try:
                    np_dtype = t.to_pandas_dtype()
                except NotImplementedError:
                    raise SourceError(f"{where}: unsupported type {t}") from None
                dtype = dtype_name(np_dtype, where)
            storage = None
            if varlen and dtype in ("uint8", "int8"):
                storage = "int64"  # varlen lists cannot be raw bytes
            if varlen and dtype == "float64":
                storage = "float"  # varlen floats are float_lists: float64 narrows to float32
            feats.append(Feature(name=name, dtype=dtype, shape=tuple(shape), varlen=varlen,
                                 storage=storage))  # fmt: skip
        return Schema(features=tuple(feats))

    def _columns(self, start: int, stop: int) -> dict[str, list[Any]]:
        schema = self._row_schema()
        out: dict[str, list[Any]] = {}
        for name in self.table.column_names:
            col = self.table.column(name).slice(start, stop - start).combine_chunks()
            f = schema[name] if name in schema.names else None
            out[name] = _arrow_values(col, f)
        return out


def _is_list(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def _arrow_values(col: Any, f: Feature | None) -> list[Any]:
    """One value per row; fixed shapes without nulls take a fast flat path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(col)
    if f is not None and f.shape and f.dtype != "bytes" and col.null_count == 0:
        flat, ok = col, True
        for dim in f.shape:
            if not _is_list(flat.type):
                ok = False
                break
            lengths = pc.list_value_length(flat)
            if flat.null_count or pc.min(lengths).as_py() != dim or pc.max(lengths).as_py() != dim:
                ok = False
                break
            flat = pc.list_flatten(flat)
        if ok and flat.null_count == 0 and not pa.types.is_nested(flat.type):
            arr = flat.to_numpy(zero_copy_only=False)
            return list(arr.reshape(n, *f.shape))
    if f is None or f.dtype == "bytes" or f.shape or f.varlen:
        return col.to_pylist()
    if col.null_count == 0 and not pa.types.is_nested(col.type):
        return list(col.to_numpy(zero_copy_only=False))
    return col.to_pylist()


class ImageFolder(RowSource):
    """root/<class>/<image>: features `image` (uint8, H x W x C) and `label` (class index).

    Classes are the subfolders in sorted order (or `classes`, to keep the indices of an
    earlier split); images are converted to C channels and resized to (H, W).
    """

    def __init__(
        self,
        path: str,
        size: tuple[int, int],
        channels: int = 3,
        classes: Sequence[str] | None = None,
    ):
        super().__init__(path)
        if channels not in _MODES:
            raise SourceError(f"{path}: channels: expected 1, 3 or 4, found {channels}")
        self.size = (int(size[0]), int(size[1]))
        self.channels = channels
        root = Path(path)
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not found:
            raise SourceError(f"{path}: no class subfolders; expected {path}/<label>/<image>")
        if classes is not None:
            unknown = [c for c in found if c not in classes]
            if unknown:
                raise SourceError(
                    f"{path}: classes {unknown} are not in the earlier list {list(classes)}"
                )
        self.classes = list(classes) if classes is not None else found
        self.files: list[tuple[str, int]] = []
        for c in found:
            for p in sorted((root / c).iterdir()):
                if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES:
                    self.files.append((str(p), self.classes.index(c)))

    @property
    def default_name(self) -> str:
        return Path(self.path).resolve().name or "images"

    def __len__(self) -> int:
        return len(self.files)

    def infer_schema(self) -> Schema:
        return image_schema(self.size, self.channels)

    def read(self, start: int, stop: int) -> Iterator[Row]:
        from PIL import Image

        for path, label in self.files[start:stop]:
            try:
                with Image.open(path) as im:
                    im = im.convert(_MODES[self.channels])
                    if im.size != (self.size[1], self.size[0]):  # PIL sizes are (W, H)
                        im = im.resize((self.size[1], self.size[0]), Image.Resampling.BILINEAR)
                    arr = np.asarray(im, dtype=np.uint8)
            except Exception as exc:
                # An unreadable file is a bad row: the writer names it (or rejects it).
                yield {"image": BadValue("a readable image", f"{path}: {exc}"),
                       "label": np.int64(label)}  # fmt: skip
                continue
            if arr.ndim == 2:
                arr = arr[:, :, None]
            yield {"image": arr, "label": np.int64(label)}


def image_schema(size: tuple[int, int], channels: int = 3) -> Schema:
    return Schema.of(
        Feature(name="image", dtype="uint8", shape=(size[0], size[1], channels)),
        Feature(name="label", dtype="int64"),
    )


class IterableSource(RowSource):
    """Any iterable of dict rows (API only); iterated once, in order, by the main process.

    Without len() the rows are read into memory first (the plan needs the count).
    """

    random_access = False

    def __init__(self, rows: Iterable[Mapping[str, Any]], length: int | None = None,
                 label: str = "<rows>"):  # fmt: skip
        super().__init__(label)
        if length is None:
            try:
                length = len(rows)  # type: ignore[arg-type]
            except TypeError:
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
        return [dict(r) for r in self._head[:n]]

    def infer_schema(self) -> Schema:
        head = self.peek(1)
        if not head:
            raise SourceError("rows: empty; cannot infer a schema (give one)")
        return infer_schema_from_row(head[0], "rows: row 0")

    def iterate(self) -> Iterator[Row]:
        if not hasattr(self, "_it"):
            self._it = iter(self._rows)
        yield from itertools.chain(self._head, self._it)
        self._head = []

    def read(self, start: int, stop: int) -> Iterator[Row]:
        return itertools.islice(self.iterate(), start, stop)


def open_rows(
    source: Any,
    *,
    schema: Schema | None = None,
    image_size: tuple[int, int] | None = None,
    channels: int = 3,
    classes: Sequence[str] | None = None,
) -> RowSource:
    """A reader for a path (by its suffix; a folder is an image folder) or an iterable.

    `schema` types CSV/Parquet columns (None: inferred); `image_size` (H, W) declares an
    image folder's size (else taken from the schema's `image` feature).
    """
    if isinstance(source, RowSource):
        return source
    if isinstance(source, (str, Path)):
        p = Path(source)
        if not p.exists():
            raise SourceError(f"{p}: no such file or folder")
        if p.is_dir():
            if image_size is None and schema is not None and "image" in schema.names:
                shape = schema["image"].shape
                if len(shape) == 3:
                    image_size, channels = (shape[0], shape[1]), shape[2]
            if image_size is None:
                raise SourceError(
                    f"{p}: an image folder needs its image size: --image-size HxW "
                    f"(API: image_size=(H, W)) or a schema with feature 'image' (H, W, C)"
                )
            return ImageFolder(str(p), image_size, channels, classes)
        suffix = p.suffix.lower()
        if suffix == ".npz":
            return NpzSource(str(p))
        if suffix == ".npy":
            return NpySource(str(p))
        if suffix == ".csv":
            return CsvSource(str(p), schema)
        if suffix in (".parquet", ".pq"):
            return ParquetSource(str(p), schema)
        raise SourceError(
            f"{p}: unknown kind of source '{suffix}'; expected .npz, .npy, .csv, .parquet "
            f"or a folder of images with one subfolder per label"
        )
    if isinstance(source, Mapping):
        raise SourceError("source: expected rows (an iterable of dicts), found one dict")
    if isinstance(source, Iterable):
        return IterableSource(source)
    raise SourceError(f"source: expected a path or an iterable of dict rows, found {source!r}")
