"""Pure shard planning for `convert`: how many records per shard, which source rows each
shard holds, and what the files in the output directory are called (and which of them a
split leaves behind). No I/O: the writer only carries out a plan.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Shards are written under the same hidden temporary names as every atomic write.
from tfperf.util.files import temp_name as temp_name
from tfperf.util.format import quoted

# TFRecord framing around each record: 8-byte length, 4-byte length CRC, 4-byte data CRC.
RECORD_OVERHEAD = 16
DEFAULT_SHARD_BYTES = 128 * 2**20
SAMPLE_ROWS = 32  # rows encoded up front to estimate records per shard
LABELS_FILE = "labels.txt"  # class names of an image folder, line i = class index i
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")  # no '-': it separates NAME and SPLIT
_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 2**30,
}


@dataclass(frozen=True)
class ShardSpan:
    """Shard `index` holds source rows [start, stop)."""

    index: int
    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class ShardPlan:
    """Every shard of one split; the spans tile [0, num_rows) in order."""

    num_rows: int
    records_per_shard: int
    spans: tuple[ShardSpan, ...]

    def __post_init__(self) -> None:
        if self.num_rows < 0 or self.records_per_shard < 1:
            raise ValueError(f"bad plan: {self.num_rows} rows, {self.records_per_shard}/shard")
        pos = 0
        for i, s in enumerate(self.spans):
            if s.index != i or s.start != pos or s.stop < s.start:
                raise ValueError(f"shard spans must tile the rows in order; found {s} at {i}")
            pos = s.stop
        if pos != self.num_rows:
            raise ValueError(f"shard spans cover {pos} rows, expected {self.num_rows}")

    @property
    def num_shards(self) -> int:
        return len(self.spans)

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_rows": self.num_rows,
            "records_per_shard": self.records_per_shard,
            "bounds": [s.start for s in self.spans] + [self.num_rows],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShardPlan:
        b = data["bounds"]
        spans = tuple(ShardSpan(i, b[i], b[i + 1]) for i in range(len(b) - 1))
        return cls(data["num_rows"], data["records_per_shard"], spans)


def records_per_shard(sample_sizes: Sequence[int], shard_bytes: int) -> int:
    """Records that fit a shard of `shard_bytes`, from the encoded sizes of the first rows.

    The mean size plus framing decides; at least one record per shard.
    """
    if shard_bytes <= 0:
        raise ValueError(f"shard_bytes must be > 0, found {shard_bytes}")
    if not sample_sizes:
        return 1
    per_record = sum(sample_sizes) / len(sample_sizes) + RECORD_OVERHEAD
    return max(1, int(shard_bytes // per_record))


def plan_shards(num_rows: int, per_shard: int) -> ShardPlan:
    """ceil(num_rows / per_shard) shards of near-equal size (they differ by at most one row).

    Balancing avoids a tiny last shard; shard i holds rows [i*n//k, (i+1)*n//k).
    Zero rows give one empty shard, so a split always has a file to name.
    """
    if num_rows < 0:
        raise ValueError(f"num_rows must be >= 0, found {num_rows}")
    if per_shard < 1:
        raise ValueError(f"records per shard must be >= 1, found {per_shard}")
    k = max(1, math.ceil(num_rows / per_shard))
    bounds = [i * num_rows // k for i in range(k + 1)]
    spans = tuple(ShardSpan(i, bounds[i], bounds[i + 1]) for i in range(k))
    return ShardPlan(num_rows, per_shard, spans)


def is_valid_name(text: str) -> bool:
    """Whether `text` can be a dataset or split name: letters, digits, '_' or '.'."""
    return _NAME_RE.fullmatch(text) is not None


def default_name(stem: str) -> str:
    """A valid dataset name made from a source's file stem ('data' when nothing is left)."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", stem).lstrip("._") or "data"


def shard_name(name: str, split: str, index: int, count: int) -> str:
    """`NAME-SPLIT.tfrecord-00003-of-00064`: self-describing, sorts in order."""
    return f"{name}-{split}.tfrecord-{index:05d}-of-{count:05d}"


def rejects_part_name(name: str, split: str, index: int) -> str:
    """Per-shard rejects, joined into `rejects_name` when the split is finished."""
    return f".{name}-{split}.rejects-{index:05d}.jsonl"


def rejects_name(name: str, split: str) -> str:
    return f"{name}-{split}.rejects.jsonl"


def progress_name(name: str, split: str) -> str:
    """Progress of an unfinished split: its plan and its finished shards (for --resume)."""
    return f".{name}-{split}.progress.json"


def shard_glob(name: str, split: str) -> str:
    """Pattern of every shard file of a split (of any shard count)."""
    return f"{name}-{split}.tfrecord-*"


def temp_glob(name: str, split: str) -> str:
    """Pattern of a split's files still under their temporary names (`temp_name`)."""
    return f".{name}-{split}.*.tmp-*"


def is_leftover(file: str, name: str, split: str) -> bool:
    """Whether `file` is one of a split's temporary files, rejects parts or shards: what an
    earlier or interrupted run of that split can leave behind."""
    prefix = f"{name}-{split}."
    ours = file.startswith((prefix, "." + prefix))
    return ours and (".tmp-" in file or ".tfrecord-" in file or ".rejects-" in file)


def parse_size(text: str | int) -> int:
    """'128MiB', '64MB', '1g', '4096' -> bytes."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"expected a size such as 128MiB, 64MB or 4096, found {quoted(text)}")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value < 1:
        raise ValueError(f"expected a size of at least 1 byte, found {quoted(text)}")
    return int(value)
