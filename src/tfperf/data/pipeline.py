"""From shards plus pipeline options to a tf.data.Dataset of batches, in one fixed stage
order. Each stage carries a one-line comment on why it sits where it does.

    list shards -> shard by worker -> shuffle file order -> interleave parallel reads
    -> [cache raw records] -> shuffle records -> repeat -> batch -> parse_example (one
    per batch) -> workload preprocessing on whole batches -> [cache] -> prefetch

(with cache_preprocessed, training repeats after the cache instead: see that stage)

`make_dataset(..., stop_after=STAGE)` cuts the pipeline after a stage; `tfperf bench`
measures every such prefix to find the slow stage. A corrupt shard either stops the run
with an error naming the file (`naming_corrupt_shards`) or, with on_corrupt=skip, loses
the rest of that shard each epoch (`skipped_records` counts it).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tfperf.config import PipelineConfig
from tfperf.errors import UserError

log = logging.getLogger(__name__)

# Stage names in order; prefixes of this list are what `bench` measures.
STAGES = ("read", "cache_records", "shuffle", "repeat", "batch", "parse", "preprocess",
          "cache", "prefetch")  # fmt: skip
# Per-element bookkeeping of a shuffle buffer on top of the element (measured: ~200 B).
SHUFFLE_OVERHEAD_BYTES = 200


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
    """Largest buffer <= requested whose records fit in the RAM budget (seed A's swap)."""
    per = max(1, record_bytes) + SHUFFLE_OVERHEAD_BYTES
    budget = int(budget_mb * 2**20)
    granted = min(requested, budget // per)
    return ShuffleBudget(requested, granted, record_bytes, budget)


# Records per block handed from the reader threads (training): ~1 MB, at most this many.
READ_BLOCK_BYTES = 2**20
MAX_READ_BLOCK = 256


def read_block(record_bytes: int) -> int:
    """Records per block for records of `record_bytes` (~1 MB blocks, 1..MAX_READ_BLOCK)."""
    return max(1, min(MAX_READ_BLOCK, READ_BLOCK_BYTES // max(1, record_bytes)))


def _autotune(value: int | str) -> int:
    import tensorflow as tf

    return tf.data.AUTOTUNE if value == "auto" else int(value)


def _record_bytes(files: Sequence[str], records: int | None, compression: str = "") -> int:
    """Mean serialized record size: file sizes over the manifest's count (a slight
    overestimate: framing), else the mean of the first file's first records."""
    import os

    if records:
        total = sum(os.path.getsize(f) for f in files if os.path.exists(f))
        return max(1, total // records)
    import tensorflow as tf

    # No count (a caller without a manifest): sample rather than guess one record per file.
    ds = tf.data.TFRecordDataset(files[0], compression or None).take(256)
    sizes = [len(r.numpy()) + 16 for r in ds]  # + TFRecord framing, as in file sizes
    return max(1, sum(sizes) // max(1, len(sizes)))


def make_dataset(
    files: Sequence[str],
    options: PipelineConfig,
    *,
    training: bool,
    parse: Callable[[Any], dict[str, Any]],
    parse_one: Callable[[Any], dict[str, Any]] | None = None,
    preprocess: Callable[[dict[str, Any]], Any] | None = None,
    preprocess_example: Callable[[dict[str, Any]], Any] | None = None,
    compression: str = "",
    records: int | None = None,
    input_context: Any = None,
    batch_size: int | None = None,
    stop_after: str | None = None,
) -> Any:
    """The tuned input pipeline over TFRecord `files`.

    parse: batched parse of a [B] string tensor (Schema.parse_batch);
    parse_one: per-example parse, used when options.parse == 'per_example';
    preprocess: whole-batch function -> (features, labels); preprocess_example: the
    per-example variant (mapped before batch) for workloads that need it;
    records: total record count (manifest) for the shuffle RAM budget;
    batch_size: overrides options.batch_size (e.g. the per-replica batch);
    stop_after: return the pipeline cut after that stage (see STAGES). In per-example mode
    the order is parse -> preprocess -> batch, so "batch" and "parse" both give unbatched
    parsed examples.
    """
    import tensorflow as tf

    if stop_after is not None and stop_after not in STAGES:
        raise PipelineError(f"stop_after: expected one of {list(STAGES)}, found '{stop_after}'")
    if not files:
        raise PipelineError("no shard files to read (is the split empty?)")
    done = lambda stage: stop_after is not None and STAGES.index(stage) >= STAGES.index(stop_after)  # noqa: E731, fmt: skip
    batch = batch_size or options.batch_size
    deterministic = (not training) if options.deterministic is None else options.deterministic
    seed = options.seed
    ds = tf.data.Dataset.from_tensor_slices(list(files))
    # Each worker reads its own files, so no record is read twice across workers.
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        else:
            log.warning(
                "%d shards for %d input pipelines: sharding records instead of files",
                len(files),
                input_context.num_input_pipelines,
            )
    # A new file order each epoch spreads shard-level correlation (training only).
    if training and options.shuffle_files and len(files) > 1:
        ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    # Several files read at once: hides per-file latency and mixes records across shards.
    cycle = min(len(files), 16) if options.interleave_cycle == "auto" else options.interleave_cycle
    skip_corrupt = options.on_corrupt == "skip"
    # Records leave the reader threads in blocks (training): the parallel interleave hands
    # each element from thread to thread (~3 CPU-us, measured), which for small records
    # costs more than reading them; ~1 MB blocks cut reading to ~1 CPU-us per record.
    # Evaluation keeps its exact record-by-record order.
    block = 1 if deterministic else read_block(_record_bytes(files, records, compression))

    def read_file(f: Any) -> Any:
        records = tf.data.TFRecordDataset(f, compression_type=compression or None,
                                          buffer_size=8 * 2**20)  # fmt: skip
        # on_corrupt=skip: a bad CRC or framing ends that shard's reading (TFRecordDataset
        # moves to the next file on DataLoss), so each epoch drops the same records;
        # `skipped_records` counts them. Inside the per-file reader the error never
        # reaches the parallel interleave.
        if skip_corrupt:
            records = records.ignore_errors(log_warning=True)
        return records.batch(block) if block > 1 else records

    ds = ds.interleave(
        read_file,
        cycle_length=max(1, cycle),
        block_length=1 if deterministic or block > 1 else 16,
        num_parallel_calls=_autotune(options.read_parallelism),
        deterministic=deterministic,
    )  # fmt: skip
    if block > 1:
        ds = ds.unbatch()  # back to records, for the record shuffle
    if (
        input_context is not None
        and input_context.num_input_pipelines > 1
        and len(files) < input_context.num_input_pipelines
    ):
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if done("read"):
        return ds
    # Raw records are cheap to keep: caching here saves disk reads, keeps shuffling fresh.
    if options.cache_records:
        ds = ds.cache("" if options.cache_records is True else str(options.cache_records))
    if done("cache_records"):
        return ds
    # Shuffle records within a RAM budget: an oversized buffer swaps (seed A).
    if training and options.shuffle_buffer > 1:
        plan = plan_shuffle_buffer(
            options.shuffle_buffer,
            _record_bytes(files, records, compression),
            options.shuffle_ram_mb,
        )
        if plan.granted < plan.requested:
            warnings.warn(
                f"pipeline.shuffle_buffer: {plan.requested} records need "
                f"~{plan.requested_bytes / 2**20:.3g} MiB, over pipeline.shuffle_ram_mb "
                f"({options.shuffle_ram_mb:.3g} MiB); using {plan.granted} records",
                stacklevel=2,
            )
        if plan.granted > 1:
            ds = ds.shuffle(plan.granted, seed=seed, reshuffle_each_iteration=True)
    if done("shuffle"):
        return ds
    # Repeat before batch so that batches never straddle a short epoch end. With
    # cache_preprocessed the repeat moves after the cache: a cache fed an endless stream
    # never finishes its first epoch, so it only grows and is never read back.
    repeat_after_cache = bool(options.cache_preprocessed) and training and options.repeat
    if training and options.repeat and not repeat_after_cache:
        ds = ds.repeat()
    if done("repeat"):
        return ds
    par = _autotune(options.preprocess_parallelism)
    if options.parse == "per_example" or preprocess_example is not None:
        # Per-example work (only where it must be): parse and map before batching.
        one = parse_one or (lambda s: {k: v[0] for k, v in parse(tf.reshape(s, [1])).items()})
        ds = ds.map(one, num_parallel_calls=par, deterministic=deterministic)
        # Here the order is parse -> preprocess -> batch: stopping at batch or parse
        # gives unbatched parsed examples.
        if done("parse"):
            return ds
        if preprocess_example is not None:
            ds = ds.map(preprocess_example, num_parallel_calls=par, deterministic=deterministic)
        ds = ds.batch(batch, drop_remainder=training)
        if preprocess is not None and preprocess_example is None:
            # Whole-batch preprocessing (e.g. the label split) still runs after a per-example parse.
            ds = ds.map(preprocess, num_parallel_calls=par, deterministic=deterministic)
        if done("preprocess"):
            return ds
    else:
        # Batch first: later maps then pay their per-call overhead once per batch (seed E).
        ds = ds.batch(batch, drop_remainder=training, num_parallel_calls=par,
                      deterministic=deterministic)  # fmt: skip
        if done("batch"):
            return ds
        # One vectorized parse_example for the whole batch.
        ds = ds.map(parse, num_parallel_calls=par, deterministic=deterministic)
        if done("parse"):
            return ds
        # The workload's preprocessing, on whole batches, in parallel.
        if preprocess is not None:
            ds = ds.map(preprocess, num_parallel_calls=par, deterministic=deterministic)
        if done("preprocess"):
            return ds
    # Caching after preprocessing replays deterministic work for free in later epochs;
    # it freezes the order within the cache, so the caller opts in.
    if options.cache_preprocessed:
        path = "" if options.cache_preprocessed is True else str(options.cache_preprocessed)
        if not path and records:
            _warn_if_cache_exceeds_ram(ds.element_spec, records / batch)
        ds = ds.cache(path)
        if training:
            ds = ds.shuffle(64, seed=seed)  # reorders cached batches each epoch
        if repeat_after_cache:
            ds = ds.repeat()  # epoch 1 fills the cache, later epochs replay it
    if done("cache"):
        return ds
    # Prefetch overlaps input with the step that consumes it: the queue of the seeds.
    ds = ds.prefetch(_autotune(options.prefetch))
    opts = tf.data.Options()
    opts.deterministic = deterministic
    opts.autotune.enabled = True  # also feeds get_model_proto (input/* metrics)
    return ds.with_options(opts)


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


def _warn_if_cache_exceeds_ram(element_spec: Any, elements: float) -> None:
    import os

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
            stacklevel=3,
        )


def steps_per_epoch(records: int, global_batch: int) -> int:
    """Full batches in one epoch (training drops the remainder)."""
    return max(1, math.floor(records / global_batch))


# ---- corrupt shards: naming the file (error) and counting what is dropped (skip) ----------


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
        f"{scan.file}: corrupt TFRecord data after {scan.readable} good records "
        f"({scan.error}); expected intact records (CRC and length framing). Rewrite the shard "
        "(`tfperf convert --resume`) or set pipeline.on_corrupt=skip to drop the rest of it"
    )


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
    import re

    text = getattr(exc, "message", None) or str(exc)
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:[^\]]*\].*$", "", text, flags=re.S)
    return text.strip()
