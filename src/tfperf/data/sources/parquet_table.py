"""Parquet source: int/float/bool columns keep their type, string/binary columns become
bytes, and list columns become fixed-shape (same lengths in every row) or varlen features."""

from __future__ import annotations

from typing import Any

from tfperf.data.schema import Feature, Schema
from tfperf.data.sources.base import SourceError, TableSource, dtype_name


class ParquetSource(TableSource):
    """A Parquet file; list columns hold fixed-shape or varlen arrays."""

    def _load(self) -> Any:
        # pyarrow is imported on first use: it is slow to import and only tables need it.
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
            while _is_list(t):
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
            feats.append(
                Feature(name=name, dtype=dtype, shape=tuple(shape), varlen=varlen, storage=storage)
            )
        return Schema(features=tuple(feats))

    def _columns(self, start: int, stop: int) -> dict[str, list[Any]]:
        schema = self._row_schema()
        out: dict[str, list[Any]] = {}
        for name in self.table.column_names:
            col = self.table.column(name).slice(start, stop - start).combine_chunks()
            f = schema[name] if name in schema else None
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
