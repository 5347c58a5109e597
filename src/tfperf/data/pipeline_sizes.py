"""The numbers an input pipeline is sized with, and the error its options raise: the
shuffle buffer that fits a RAM budget, records per reader block, the mean record size, the
RAM a cache takes (and the warning when it does not fit), steps per epoch. Used by
data/pipeline.py and by the doctor's advice; only the record sampling reads files.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfperf.errors import UserError

# Per-element RSS of a shuffle buffer on top of the element's bytes: measured 190-470 B
# (an int64: 190; a 245-B string record: 420; (float32[32], float32[1]): 470), the upper end
# so that a buffer capped at a budget stays within it.
SHUFFLE_OVERHEAD_BYTES = 500


class PipelineError(UserError):
    """Options that cannot make a pipeline; the message names the option."""


@dataclass(frozen=True)
class ShuffleBudget:
    requested: int
    granted: int
    record_bytes: int
    budget_bytes: int

    @property
    def requested_bytes(self) -> int:
        return self.requested * (self.record_bytes + SHUFFLE_OVERHEAD_BYTES)


def plan_shuffle_buffer(requested: int, record_bytes: int, budget_mb: float) -> ShuffleBudget:
    """Largest buffer <= requested whose records fit in the RAM budget (a larger one swaps)."""
    per = max(1, record_bytes) + SHUFFLE_OVERHEAD_BYTES
    budget = int(budget_mb * 2**20)
    granted = min(requested, budget // per)
    return ShuffleBudget(requested, granted, record_bytes, budget)


# Records per block handed from the reader threads (training): ~1 MB, at most this many.
READ_BLOCK_BYTES = 2**20
MAX_READ_BLOCK = 256
# A block is a run of one shard's consecutive records: the record shuffle must hold this
# many blocks to mix shards; never below the interleave's record-path block of 16.
BLOCKS_PER_SHUFFLE = 16
MIN_SHUFFLE_BLOCK = 16


def read_block(record_bytes: int, shuffle_buffer: int | None = None) -> int:
    """Records per block for records of `record_bytes` (~1 MB blocks, 1..MAX_READ_BLOCK),
    at most 1/16 of `shuffle_buffer` (but >= 16) when one is given: a small shuffle buffer
    fed whole blocks would train on long runs of one shard (often one class)."""
    block = max(1, min(MAX_READ_BLOCK, READ_BLOCK_BYTES // max(1, record_bytes)))
    if shuffle_buffer is None:
        return block
    return min(block, max(MIN_SHUFFLE_BLOCK, shuffle_buffer // BLOCKS_PER_SHUFFLE))


def record_bytes(files: Sequence[str], records: int | None, compression: str = "") -> int:
    """Mean serialized record size: file sizes over the manifest's count (a slight
    overestimate: framing), else the mean of the first file's first records."""
    if records:
        total = sum(os.path.getsize(f) for f in files if os.path.exists(f))
        return max(1, total // records)
    # TensorFlow is imported on first use so that `import tfperf` and `tfperf --help` stay fast.
    import tensorflow as tf

    # No count (a caller without a manifest): sample rather than guess one record per file.
    ds = tf.data.TFRecordDataset(files[0], compression or None).take(256)
    sizes = [len(r.numpy()) + 16 for r in ds]  # + TFRecord framing, as in file sizes
    return max(1, sum(sizes) // max(1, len(sizes)))


def cache_bytes(element_spec: Any, elements: float) -> int | None:
    """RAM that `elements` cached elements of `element_spec` take; None when a shape is
    not fully known."""
    import tensorflow as tf

    total = 0
    for spec in tf.nest.flatten(element_spec):
        shape = getattr(spec, "shape", None)
        if shape is None or not shape.is_fully_defined() or spec.dtype == tf.string:
            return None
        total += shape.num_elements() * spec.dtype.size
    return int(total * elements)


def steps_per_epoch(records: int, global_batch: int) -> int:
    """Full batches in one epoch (training drops the remainder)."""
    return max(1, math.floor(records / global_batch))


def warn_if_cache_exceeds_ram(element_spec: Any, elements: float, stacklevel: int = 2) -> None:
    """Warns when `elements` cached elements would not fit in the free RAM."""
    need = cache_bytes(element_spec, elements)
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    if need is not None and need > free:
        warnings.warn(
            f"pipeline.cache_preprocessed: one epoch of preprocessed batches needs "
            f"~{need / 2**30:.3g} GiB of RAM, more than the {free / 2**30:.3g} GiB free; "
            "cache to a file (a path prefix) or leave it off",
            stacklevel=stacklevel,
        )
