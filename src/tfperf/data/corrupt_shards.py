"""Corrupt shards: naming the file when a pipeline hits a bad TFRecord (on_corrupt=error,
`naming_corrupt_shards`) and counting the records on_corrupt=skip drops each epoch
(`skipped_records`). Error paths only: each reads shards on its own, in full.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from tfperf.data.pipeline_sizes import PipelineError


class CorruptShardError(PipelineError):
    """A shard failed TFRecord's CRC/framing check; the message names the file."""


@dataclass(frozen=True)
class ShardScan:
    """One shard read on its own: records readable before the first error, if any."""

    file: str
    readable: int
    error: str | None  # TensorFlow's message ("corrupted record at <byte offset>"), or None


def scan_shard(file: str, compression: str = "") -> ShardScan:
    """Reads one shard to its end or its first bad record (a full read: for error paths)."""
    # TensorFlow is imported on first use so that `import tfperf` and `tfperf --help` stay fast.
    import tensorflow as tf

    ds = tf.data.TFRecordDataset(file, compression_type=compression or None)
    count = 0
    try:
        # Batched so that Python sees one element per 4096 records.
        for chunk in ds.batch(4096):
            count += int(chunk.shape[0])
    except tf.errors.DataLossError as exc:
        # The batch holding the bad record was lost: count again, stopping at the bad one.
        count = sum(int(c.shape[0]) for c in ds.ignore_errors().batch(4096))
        return ShardScan(file, count, _tf_message(exc))
    return ShardScan(file, count, None)


def find_corrupt_shard(files: Sequence[str], compression: str = "") -> ShardScan | None:
    """The first shard in `files` that cannot be read to its end, or None."""
    for f in files:
        scan = scan_shard(f, compression)
        if scan.error is not None:
            return scan
    return None


def corrupt_shard_error(
    files: Sequence[str], compression: str = "", cause: str = ""
) -> PipelineError:
    """The UserError for a DataLossError raised while iterating a pipeline over `files`.

    TensorFlow's message gives a byte offset but not the file, so the shards are scanned
    (in order, stopping at the first bad one) to name it.
    """
    scan = find_corrupt_shard(files, compression)
    if scan is None:
        return CorruptShardError(
            f"reading {len(files)} shard(s) failed a TFRecord check ({cause}), but every shard "
            "reads cleanly now: is a file being rewritten while training reads it?"
        )
    return CorruptShardError(
        f"{scan.file}: corrupt TFRecord data {_where(scan, compression)}; expected intact "
        "records (CRC and length framing). Rewrite the shard (`tfperf convert --resume`) or "
        "set pipeline.on_corrupt=skip to drop the rest of it"
    )


def _where(scan: ShardScan, compression: str) -> str:
    """The bad record as `tfperf inspect --verify` names it (its index and first byte; for
    GZIP in the decompressed stream): one definition of the offset for both. TensorFlow's
    own offset (of the failing read, not of the record) stays in brackets."""
    from tfperf.data.verify import scan_file

    good, err = scan_file(scan.file, compression)
    if err is None:  # TensorFlow failed where Python's reader did not: its words only
        return f"after {scan.readable} good records ({scan.error})"
    stream = " of the decompressed GZIP stream" if compression else ""
    return f"at record {good}, byte {err.offset}{stream}: {err.reason} (TensorFlow: {scan.error})"


@contextmanager
def naming_corrupt_shards(files: Sequence[str], compression: str = "") -> Iterator[None]:
    """Re-raises a DataLossError from iterating a pipeline as CorruptShardError naming the file.

    Wrap the loop that pulls batches (on_corrupt=error):
        with naming_corrupt_shards(files):
            for batch in ds: ...
    """
    import tensorflow as tf

    try:
        yield
    except tf.errors.DataLossError as exc:
        raise corrupt_shard_error(files, compression, _tf_message(exc)) from None


def skipped_records(
    files: Sequence[str], expected: Sequence[int], compression: str = ""
) -> dict[str, int]:
    """Records that on_corrupt=skip drops in every epoch, per shard with any dropped.

    `expected` holds each shard's record count from the manifest. The drop is the same
    every epoch (the rest of a shard after its first bad record), so one scan gives the
    per-epoch count that the loop reports at each epoch's end. Evaluation, which reads one
    epoch, can instead compare the records it saw with the manifest's total.
    """
    if len(files) != len(expected):
        raise ValueError(f"{len(files)} files but {len(expected)} expected counts")
    out = {}
    for f, n in zip(files, expected, strict=True):
        missing = n - scan_shard(f, compression).readable
        if missing > 0:
            out[f] = missing
    return out


def _tf_message(exc: Exception) -> str:
    """TensorFlow's error text without the '{{function_node ...}}' and '[Op:...]' noise."""
    text = getattr(exc, "message", None) or str(exc)
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:[^\]]*\].*$", "", text, flags=re.S)
    return text.strip()
