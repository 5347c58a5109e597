"""What `convert` is asked to do: every option in one frozen ConvertOptions, checked when it
is made, and the preprocess option's forms (a callable, a 'module:function' name, or a
PreprocessFactory that worker processes rebuild). No I/O beyond importing a named function.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfperf.data.schema import DTYPES, Schema, SchemaError, check_dtype
from tfperf.data.shards import DEFAULT_SHARD_BYTES, is_valid_name
from tfperf.errors import UserError
from tfperf.util.format import quoted
from tfperf.util.imports import load_object

# --compression spellings -> the manifest's (and TFRecordDataset's) compression type.
COMPRESSIONS = {"": "", "none": "", "gzip": "GZIP"}
MAX_DEFAULT_WORKERS = 4  # more writer processes rarely help: disks and sources saturate


class ConvertError(UserError):
    """A conversion that cannot go on; the message names the source, row or option."""


@dataclass(frozen=True)
class PreprocessFactory:
    """A preprocess function that worker processes rebuild instead of unpickling (e.g. a
    closure over options): `load_object(factory)(**kwargs)` returns it; `description`
    names it in the manifest and in resume checks."""

    factory: str  # "module:function"
    kwargs: dict[str, Any]
    description: str

    def build(self) -> Callable[[Any], Any]:
        return load_object(self.factory, field="preprocess")(**self.kwargs)


# A row -> row function, where to import it from, or how to rebuild it; None: rows as read.
Preprocess = Callable[[dict[str, Any]], dict[str, Any]] | str | PreprocessFactory | None


@dataclass(frozen=True)
class ConvertOptions:
    """Every option of `convert`; `tfperf.convert(source, out, **options)` builds one.

    Invalid values raise ConvertError on creation, naming the command-line option.
    `compression` is kept in the manifest's spelling ("" or "GZIP").
    """

    schema: Schema | None = None  # None: inferred from the source or the first output row
    name: str | None = None  # None: the source's file stem (shards.default_name)
    split: str = "train"  # the usual first split; others are added beside it
    preprocess: Preprocess = None  # applied to each row once, while converting
    shard_bytes: int = DEFAULT_SHARD_BYTES  # shards.py: 128 MiB shards
    workers: int | None = None  # None: min(MAX_DEFAULT_WORKERS, CPU count); see worker_count
    compression: str = ""  # "", "none" or "gzip"; none by default (fastest to read)
    resume: bool = False  # True: continue an interrupted run of this split
    on_bad_row: str = "error"  # "error": stop at the first; "skip": NAME-SPLIT.rejects.jsonl
    max_examples: int | None = None  # None: every row (a debug limit)
    progress: bool = True  # the progress bar and notes on stderr
    image_size: tuple[int, int] | None = None  # image folders; None: the schema's 'image'
    channels: int = 3  # image folders: RGB
    workload: str | None = None  # the built-in workload that generated the rows (manifest)
    overwrite: bool = False  # replace splits of --out whose schema differs (their shards go)
    column_types: Mapping[str, str] | None = None  # CSV: dtypes declared for some columns
    seed: int = 0  # image folders: the seed of the shuffled file order
    tfds_metadata: bool = False  # also write TFDS's dataset_info.json and features.json

    def __post_init__(self) -> None:
        key = (self.compression or "").lower()
        if key not in COMPRESSIONS:
            raise ConvertError(
                f"--compression: expected 'gzip' or none, found {quoted(self.compression)}"
            )
        object.__setattr__(self, "compression", COMPRESSIONS[key])  # frozen: set once here
        if self.on_bad_row not in ("error", "skip"):
            raise ConvertError(
                f"--on-bad-row: expected 'error' or 'skip', found {quoted(self.on_bad_row)}"
            )
        if not is_valid_name(self.split):
            raise ConvertError(
                f"--split: expected letters, digits, '_' or '.', found {quoted(self.split)}"
            )
        if self.max_examples is not None and self.max_examples < 0:
            raise ConvertError(f"--max-examples: expected a number >= 0, found {self.max_examples}")
        if self.name is not None and not is_valid_name(self.name):
            raise ConvertError(
                f"--name: expected letters, digits, '_' or '.', found {quoted(self.name)}"
            )
        if self.shard_bytes <= 0:
            raise ConvertError(f"--shard-size: expected a size > 0, found {self.shard_bytes}")
        if self.column_types:
            if self.schema is not None:
                raise ConvertError(
                    "--column-types: give either --schema (every feature) or --column-types "
                    "(some CSV columns), not both"
                )
            try:
                for col, dtype in self.column_types.items():
                    check_dtype(dtype, f"--column-types {col}")
            except SchemaError as exc:
                raise ConvertError(str(exc)) from None
        if self.tfds_metadata and self.compression:
            raise ConvertError(
                "--tfds-metadata: TFDS reads uncompressed TFRecord shards only; convert with "
                "--compression none"
            )
        pre = self.preprocess
        if pre is not None and not isinstance(pre, (str, PreprocessFactory)) and not callable(pre):
            raise ConvertError(
                f"preprocess: expected a callable, 'module:function' or a PreprocessFactory, "
                f"found {quoted(pre)}"
            )

    def worker_count(self, shards: int) -> int:
        """Writer processes for `shards` unfinished shards: `workers` (or the default), at
        most one per shard, at least one."""
        default = min(MAX_DEFAULT_WORKERS, os.cpu_count() or 1)
        return max(1, min(self.workers or default, shards))


def load_preprocess(pre: Any) -> Callable[[Any], Any] | None:
    """The function itself from what the option (or a worker's task) carries: a name is
    imported, a factory rebuilt, a callable returned as it is."""
    if isinstance(pre, str):
        return load_object(pre, field="--preprocess")
    if isinstance(pre, PreprocessFactory):
        return pre.build()
    return pre


def preprocess_label(pre: Preprocess) -> str | None:
    """How error messages name the preprocess function: as the option, when it was one."""
    spec = describe_preprocess(pre)
    if spec is None:
        return None
    return f"--preprocess {spec}" if isinstance(pre, str) else f"preprocess {spec}"


def describe_preprocess(pre: Preprocess) -> str | None:
    """How the manifest and resume checks name the preprocess option."""
    if pre is None:
        return None
    if isinstance(pre, str):
        return pre
    if isinstance(pre, PreprocessFactory):
        return pre.description
    return f"{pre.__module__}:{getattr(pre, '__qualname__', '?')}"


def parse_column_types(text: str) -> dict[str, str]:
    """'zip=bytes, n=int32' (--column-types) -> {'zip': 'bytes', 'n': 'int32'}."""
    types: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        name, eq, dtype = part.partition("=")
        if not part or not eq or not name.strip() or not dtype.strip():
            raise ConvertError(
                f"--column-types: expected NAME=DTYPE[,NAME=DTYPE...] with DTYPE one of "
                f"{', '.join(DTYPES)}; found {quoted(part)}"
            )
        types[name.strip()] = dtype.strip()
    return types
