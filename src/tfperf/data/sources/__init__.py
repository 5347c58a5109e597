"""Raw-data readers for `convert`, one module per format: .npz/.npy (arrays.py), CSV
(csv_table.py), Parquet (parquet_table.py), a folder of images with one subfolder per label
(images.py) and any iterable of dict rows (rows.py); base.py holds what they share.
`open_rows` picks the reader. Each yields plain dict rows (numpy arrays, numbers, bytes) by
row index and can infer a Schema; writing lives in data/convert/.

Schema inference (used when no schema is given):
- .npz: one feature per array (first axis = rows), dtype kept (float16 -> float32, other
  ints widened to int32/int64), shape = the array's shape without the first axis;
  string arrays -> bytes. A single .npy is one feature named after the file.
- CSV (header = names): from the first 10,000 rows, a column most of whose non-empty cells
  parse as numbers is numeric (int64 when they are all integers, else float32) and its other
  cells are bad rows (a note names the first); otherwise bytes. `column_types`
  (--column-types) declares some columns' dtypes; convert types a CSV with the same columns
  as the dataset already in its folder as that dataset (CsvSource.adopt). With an explicit
  schema, cells of a shaped or varlen feature hold numbers separated by spaces or commas
  (brackets are ignored).
- Parquet: int/float/bool columns keep their type (int16 -> int32, uint8 -> uint8, ...),
  string/binary -> bytes; list columns -> fixed shapes when every row has the same
  lengths, else a varlen 1-D feature.
- Image folder: `image` uint8 (H, W, C) of the declared size (images are resized to it)
  and `label` int64, the index of the subfolder in sorted order (the class names); the
  files are read in a seeded shuffled order, so that any first rows mix the classes.
- Iterable of dicts: inferred from the first row (Python int -> int64, float -> float32,
  str/bytes -> bytes, numpy values keep their dtype).
Readers are picklable: worker processes reopen the file lazily and read their own rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tfperf.data.schema import Schema
from tfperf.data.sources.arrays import NpySource, NpzSource
from tfperf.data.sources.base import (
    BadValue,
    Row,
    RowSource,
    SourceError,
    TableSource,
    dtype_name,
    infer_feature,
    infer_schema_from_row,
)
from tfperf.data.sources.csv_table import CsvSource
from tfperf.data.sources.images import IMAGE_SUFFIXES, ImageFolder, image_schema
from tfperf.data.sources.parquet_table import ParquetSource
from tfperf.data.sources.rows import IterableSource
from tfperf.util.format import quoted

__all__ = [
    "IMAGE_SUFFIXES",
    "BadValue",
    "CsvSource",
    "ImageFolder",
    "IterableSource",
    "NpySource",
    "NpzSource",
    "ParquetSource",
    "Row",
    "RowSource",
    "SourceError",
    "TableSource",
    "dtype_name",
    "image_schema",
    "infer_feature",
    "infer_schema_from_row",
    "open_rows",
]


def open_rows(
    source: Any,
    *,
    schema: Schema | None = None,
    image_size: tuple[int, int] | None = None,
    channels: int = 3,
    classes: Sequence[str] | None = None,
    column_types: Mapping[str, str] | None = None,
    seed: int = 0,
) -> RowSource:
    """A reader for a path (by its suffix; a folder is an image folder) or an iterable.

    `schema` types CSV/Parquet columns (None: inferred); `column_types` declares some CSV
    columns' dtypes; `image_size` (H, W) declares an image folder's size (else taken from
    the schema's `image` feature); `seed` orders an image folder's files.
    """
    if column_types and not (isinstance(source, (str, Path)) and _is_csv(source)):
        raise SourceError(
            f"--column-types: applies to CSV files only, found {quoted(source)}; for other sources "
            f"declare every feature with --schema"
        )
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
            return ImageFolder(str(p), image_size, channels, classes, seed)
        suffix = p.suffix.lower()
        if suffix == ".npz":
            return NpzSource(str(p))
        if suffix == ".npy":
            return NpySource(str(p))
        if suffix == ".csv":
            return CsvSource(str(p), schema, column_types)
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
    raise SourceError(
        f"source: expected a path or an iterable of dict rows, found {quoted(source)}"
    )


def _is_csv(path: str | Path) -> bool:
    return Path(path).suffix.lower() == ".csv"
