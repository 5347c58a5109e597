"""Features declared once: parse specs for batched `tf.io.parse_example`, Example encoding
of numpy rows, decoding of parsed batches, and row validation.

A feature's *storage* is how it sits inside a tf.train.Example:
- ``float``: a float_list (exact for float32 only);
- ``int64``: an int64_list;
- ``bytes``: a bytes_list; for a numeric dtype the array's raw little-endian bytes,
  decoded after parsing with one ``decode_raw`` over the whole batch.
This module never touches files.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tfperf.data.example_proto import messages
from tfperf.errors import UserError
from tfperf.util.format import QUOTE_LIMIT, cut, quoted

DType = Literal["float32", "float64", "int64", "int32", "uint8", "int8", "bool", "bytes"]
Storage = Literal["float", "int64", "bytes"]

# Default storage per dtype: exact round trip for every dtype, compact for small ints.
_DEFAULT_STORAGE: dict[str, str] = {
    "float32": "float",
    "float64": "bytes",  # float_list holds float32: raw bytes keep float64 exact
    "int64": "int64",
    "int32": "int64",
    "uint8": "bytes",  # one byte per value instead of a varint per value
    "int8": "bytes",
    "bool": "int64",
    "bytes": "bytes",
}
_ALLOWED_STORAGE: dict[str, set[str]] = {
    "float32": {"float", "bytes"},
    "float64": {"bytes", "float"},
    "int64": {"int64", "bytes"},
    "int32": {"int64", "bytes"},
    "uint8": {"bytes", "int64"},
    "int8": {"bytes", "int64"},
    "bool": {"int64"},
    "bytes": {"bytes"},
}


class SchemaError(UserError):
    """A schema declaration that cannot work."""


class RowError(UserError):
    """A row that does not match the schema; the message names row, feature, expected, found.

    `row` is the row's index (from 0); messages count rows from 1, as users do. A feature
    of "(row)" means the whole row (e.g. a CSV line with too many cells). `hint` says how
    to fix it, when there is more to say than expected vs found.
    """

    WHOLE_ROW = "(row)"

    def __init__(
        self, row: int | None, feature: str, expected: str, found: str, hint: str | None = None
    ):
        # `found` may quote a user's cell or value: cut to what a message can show (a quote
        # already cut by `quoted` passes whole).
        self.row, self.feature, self.expected = row, cut(feature), expected
        self.found = cut(found, QUOTE_LIMIT + 100)
        self.hint = hint
        super().__init__(self.located("row" if row is None else f"row {row + 1}"))

    def located(self, location: str, item: str = "feature") -> str:
        """The message with the row named by `location` (e.g. "line 7") and its fields
        called `item` (e.g. "column")."""
        field = "" if self.feature == self.WHOLE_ROW else f", {item} '{self.feature}'"
        hint = f"; {self.hint}" if self.hint else ""
        return f"{location}{field}: expected {self.expected}, found {self.found}{hint}"


class Feature(BaseModel):
    """One named feature: dtype, shape of one example, fixed or variable length.

    Unknown keys (a newer tfperf's) are kept and ignored; `schema_from_dict` refuses them
    in a schema the user writes, where they are typos.
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    name: str
    dtype: DType
    shape: tuple[int, ...] = ()
    varlen: bool = False  # a 1-D list whose length differs between examples
    storage: Storage | None = None  # None: the dtype's default (see _DEFAULT_STORAGE)

    @field_validator("shape")
    @classmethod
    def _positive_dims(cls, shape: tuple[int, ...]) -> tuple[int, ...]:
        if any(d <= 0 for d in shape):
            raise ValueError(f"every dimension must be > 0, found {list(shape)}")
        return shape

    @model_validator(mode="after")
    def _check(self) -> Feature:
        store = self.storage or _DEFAULT_STORAGE[self.dtype]
        if store not in _ALLOWED_STORAGE[self.dtype]:
            raise ValueError(
                f"feature '{self.name}': storage '{store}' cannot hold dtype {self.dtype}; "
                f"expected one of {sorted(_ALLOWED_STORAGE[self.dtype])}"
            )
        if self.varlen and self.shape:
            raise ValueError(f"feature '{self.name}': a varlen feature has no fixed shape")
        if self.varlen and self.dtype != "bytes" and store == "bytes":
            raise ValueError(
                f"feature '{self.name}': varlen numeric features need storage 'int64' or 'float'"
            )
        if self.dtype == "bytes" and self.shape:
            raise ValueError(
                f"feature '{self.name}': a bytes feature is one string per example (shape [])"
            )
        return self

    @property
    def stored_as(self) -> str:
        return self.storage or _DEFAULT_STORAGE[self.dtype]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def raw(self) -> bool:
        """Numeric data packed as bytes (decoded with decode_raw after parsing)."""
        return self.stored_as == "bytes" and self.dtype != "bytes"

    def describe(self) -> str:
        """`name dtype [shape]` as messages show it, e.g. "img uint8 [2, 2]", "ids int64 varlen"."""
        shape = " varlen" if self.varlen else f" {list(self.shape)}" if self.shape else ""
        return f"{self.name} {self.dtype}{shape}"


class Schema(BaseModel):
    """An ordered set of features; JSON-serialisable into manifest.json."""

    model_config = ConfigDict(frozen=True, extra="allow")  # unknown keys: as in Feature

    features: tuple[Feature, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Schema:
        counts = Counter(f.name for f in self.features)
        dup = {n for n, k in counts.items() if k > 1}
        if dup:
            raise ValueError(f"feature names must be unique, found duplicates {sorted(dup)}")
        return self

    @classmethod
    def of(cls, *features: Feature) -> Schema:
        return cls(features=features)

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    # Built once per schema (frozen): a wide table's lookups stay linear in its columns.
    @cached_property
    def _by_name(self) -> dict[str, Feature]:
        return {f.name: f for f in self.features}

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Feature:
        return self._by_name[name]

    def same_records(self, other: Schema | None) -> bool:
        """Whether records of `other` read as this schema's: the same features, ignoring
        unknown keys (a newer tfperf's notes) that do not change how records are read."""
        if other is None:
            return False
        known = set(Feature.model_fields)
        mine = [f.model_dump(include=known) for f in self.features]
        return mine == [f.model_dump(include=known) for f in other.features]

    def describe(self) -> str:
        """Every feature as `name dtype [shape]`, e.g. "id int64, x float32 [2]"."""
        return ", ".join(f.describe() for f in self.features)

    def with_dtypes(self, dtypes: Mapping[str, str], option: str = "--column-types") -> Schema:
        """This schema with some features' dtypes replaced (a bytes feature has no shape);
        SchemaError names `option` and the unknown names or dtypes."""
        unknown = [n for n in dtypes if n not in self.names]
        if unknown:
            raise SchemaError(
                f"{option}: no column {quoted(unknown[0])}; the columns are "
                f"{cut(', '.join(self.names))}"
            )
        feats = []
        for f in self.features:
            if f.name not in dtypes:
                feats.append(f)
                continue
            dtype = check_dtype(dtypes[f.name], f"{option} {f.name}")
            shape = () if dtype == "bytes" else f.shape
            feats.append(Feature(name=f.name, dtype=dtype, shape=shape, varlen=f.varlen))
        return Schema(features=tuple(feats))

    # ---- validation ------------------------------------------------------------------
    def validate_row(self, row: Mapping[str, Any], index: int | None = None) -> dict[str, Any]:
        """Checks one row and returns it normalised to numpy arrays / bytes."""
        missing = [n for n in self._by_name if n not in row]
        if missing:
            raise RowError(index, missing[0], "a value", "no such key in the row")
        extra = [k for k in row if k not in self._by_name]
        if extra:
            raise RowError(index, extra[0], "no such feature (not in the schema)", "a value")
        return {f.name: _check_value(f, row[f.name], index) for f in self.features}

    # ---- encoding --------------------------------------------------------------------
    def encode(self, row: Mapping[str, Any], index: int | None = None) -> bytes:
        """Validates one row and serialises it as a tf.train.Example."""
        m = messages()  # protobuf only: a convert worker never imports TensorFlow
        clean = self.validate_row(row, index)
        feats = {}
        for f in self.features:
            v = clean[f.name]
            store = f.stored_as
            if store == "bytes":
                data = (
                    v
                    if f.dtype == "bytes"
                    else np.ascontiguousarray(v)
                    .astype(v.dtype.newbyteorder("<"), copy=False)
                    .tobytes()
                )
                feats[f.name] = m["Feature"](bytes_list=m["BytesList"](value=[data]))
            elif store == "int64":
                feats[f.name] = m["Feature"](
                    int64_list=m["Int64List"](value=v.reshape(-1).astype(np.int64).tolist())
                )
            else:
                feats[f.name] = m["Feature"](
                    float_list=m["FloatList"](value=v.reshape(-1).tolist())
                )
        ex = m["Example"](features=m["Features"](feature=feats))
        # Sorted map keys: the same row gives the same bytes in every process (exact resume).
        return ex.SerializeToString(deterministic=True)

    # ---- parsing ---------------------------------------------------------------------
    def parse_spec(self) -> dict[str, Any]:
        """Spec for tf.io.parse_example / parse_single_example."""
        import tensorflow as tf

        spec: dict[str, Any] = {}
        for f in self.features:
            store = f.stored_as
            if f.varlen:
                tf_dtype = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string}[store]
                spec[f.name] = tf.io.RaggedFeature(dtype=tf_dtype)
            elif store == "bytes":
                spec[f.name] = tf.io.FixedLenFeature([], tf.string)
            elif store == "int64":
                spec[f.name] = tf.io.FixedLenFeature(list(f.shape), tf.int64)
            else:
                spec[f.name] = tf.io.FixedLenFeature(list(f.shape), tf.float32)
        return spec

    def decode(self, parsed: Mapping[str, Any]) -> dict[str, Any]:
        """Turns parse_example's output (batched or single) into tensors of each dtype/shape.

        Raw-bytes features are decoded with one decode_raw over the whole batch.
        """
        import tensorflow as tf

        out = {}
        for f in self.features:
            t = parsed[f.name]
            tf_dtype = tf.string if f.dtype == "bytes" else tf.as_dtype(f.dtype)
            if f.raw:
                flat = tf.io.decode_raw(t, tf_dtype, little_endian=True)
                # rank is static: 0 for one example, 1 for a batch; keeps shapes static,
                # the batch size too when known (as parse_example does for other features)
                n = (t.shape[0] or -1) if t.shape.rank == 1 else None
                t = tf.reshape(flat, [n, *f.shape] if n is not None else list(f.shape))
            elif t.dtype != tf_dtype:
                t = tf.cast(t, tf_dtype)
            out[f.name] = t
        return out

    def parse_batch(self, serialized: Any) -> dict[str, Any]:
        """One vectorized parse of a batch of serialized Examples, decoded."""
        import tensorflow as tf

        return self.decode(tf.io.parse_example(serialized, self.parse_spec()))

    def parse_one(self, serialized: Any) -> dict[str, Any]:
        """Per-example parse (the slow path; kept for originals and tests)."""
        import tensorflow as tf

        return self.decode(tf.io.parse_single_example(serialized, self.parse_spec()))

    def decode_numpy(self, serialized: bytes) -> dict[str, Any]:
        """Decodes one Example to numpy without TensorFlow's graph (inspect, tests)."""
        from tensorflow.core.example import example_pb2

        ex = example_pb2.Example.FromString(serialized)
        out: dict[str, Any] = {}
        for f in self.features:
            feat = ex.features.feature[f.name]
            store = f.stored_as
            if store == "bytes":
                data = feat.bytes_list.value[0] if feat.bytes_list.value else b""
                out[f.name] = (
                    data
                    if f.dtype == "bytes"
                    else np.frombuffer(data, np.dtype(f.dtype).newbyteorder("<"))
                    .astype(f.dtype)
                    .reshape(f.shape)
                )
            else:
                vals = feat.int64_list.value if store == "int64" else feat.float_list.value
                arr = np.asarray(list(vals), dtype=f.dtype)
                out[f.name] = arr if f.varlen else arr.reshape(f.shape)
        return out


def _check_value(f: Feature, value: Any, index: int | None) -> Any:
    """Normalises one value to what `encode` expects, or raises RowError naming it."""
    if f.dtype == "bytes":
        if isinstance(value, str):
            return value.encode()
        if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "SUO":
            value = value.item()
            value = value.encode() if isinstance(value, str) else value
        if isinstance(value, (bytes, bytearray, np.bytes_)):
            return bytes(value)
        raise RowError(index, f.name, "bytes or str", type(value).__name__)
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged nested lists and the like
        found = f"{type(value).__name__}: {exc}"
        raise RowError(index, f.name, f"an array of {f.dtype}", found) from None
    if arr.dtype.kind not in "biuf":
        raise RowError(index, f.name, f"numbers ({f.dtype})", f"dtype {arr.dtype}")
    if f.varlen:
        if arr.ndim > 1:
            raise RowError(index, f.name, "a 1-D list (varlen)", f"shape {list(arr.shape)}")
        arr = arr.reshape(-1)
    elif tuple(arr.shape) != f.shape:
        if arr.size == f.size and arr.ndim <= 1 and len(f.shape) <= 1:
            arr = arr.reshape(f.shape)  # a scalar given as [x] or a flat list
        else:
            raise RowError(index, f.name, f"shape {list(f.shape)}", f"shape {list(arr.shape)}")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr)
        if bad.any():
            pos = tuple(int(i) for i in np.argwhere(bad)[0])
            raise RowError(index, f.name, "finite floats", f"{arr[bad][0]} at index {list(pos)}")
        if np.dtype(f.dtype).kind != "f":
            if not np.all(arr == np.round(arr)):
                raise RowError(index, f.name, f"integers ({f.dtype})", "non-integer floats")
    target = np.dtype(f.dtype)
    if target.kind in "iub" and arr.size:
        info = np.iinfo(target) if target.kind != "b" else None
        if info is not None and (arr.min() < info.min or arr.max() > info.max):
            raise RowError(
                index,
                f.name,
                f"values in [{info.min}, {info.max}] ({f.dtype})",
                f"range [{arr.min()}, {arr.max()}]",
            )
        if target.kind == "b" and not np.isin(arr, (0, 1)).all():
            raise RowError(index, f.name, "booleans (0/1)", f"values {np.unique(arr)[:5].tolist()}")
    return arr.astype(target, copy=False)


DTYPES: tuple[str, ...] = get_args(DType)


def check_dtype(text: str, where: str) -> str:
    """`text` if it is a schema dtype, else a SchemaError listing them."""
    if text not in DTYPES:
        raise SchemaError(
            f"{where}: expected a dtype, one of {', '.join(DTYPES)}; found {quoted(text)}"
        )
    return text


def schema_from_dict(
    data: Mapping[str, Any] | Sequence[Mapping[str, Any]], strict: bool = True
) -> Schema:
    """Builds a Schema from {features: [...]} or a list of features. `strict` (a schema the
    user wrote) refuses unknown keys, which are typos there; a manifest's are kept."""
    feats = data.get("features") if isinstance(data, Mapping) else data
    if strict and isinstance(feats, Sequence):
        known = set(Feature.model_fields)
        for i, f in enumerate(feats):
            extra = sorted(set(f) - known) if isinstance(f, Mapping) else []
            if extra:
                name = f.get("name", f"#{i + 1}")
                raise SchemaError(
                    f"feature {quoted(name)}: unknown key {quoted(extra[0])}; "
                    f"expected {', '.join(known)}"
                )
    if isinstance(data, Mapping):
        return Schema.model_validate(data)
    return Schema(features=tuple(Feature.model_validate(d) for d in data))
