"""From shards plus pipeline options to a tf.data.Dataset of batches, in one fixed stage
order; one function per stage, each with a one-line comment on why it sits where it does.

    list shards -> shard by worker -> shuffle file order -> interleave parallel reads
    -> [cache raw records] -> shuffle records -> repeat -> batch -> parse_example (one
    per batch) -> workload preprocessing on whole batches -> [cache] -> prefetch

(with cache_preprocessed, training repeats after the cache instead: see that stage)

`make_dataset(..., stop_after=STAGE)` cuts the pipeline after a stage; `tfperf bench`
measures every such prefix to find the slow stage. The sizes it plans with live in
pipeline_sizes.py; corrupt shards (an error naming the file, or with on_corrupt=skip the
rest of that shard lost each epoch) in corrupt_shards.py.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.config import PipelineConfig
from tfperf.data.pipeline_sizes import (
    SHUFFLE_OVERHEAD_BYTES,
    PipelineError,
    plan_shuffle_buffer,
    read_block,
    record_bytes,
    warn_if_cache_exceeds_ram,
)

if TYPE_CHECKING:
    import tensorflow as tf

# The doctor's RAM rule reads the shuffle budget from here (pipeline_sizes has the rest).
__all__ = [
    "SHUFFLE_OVERHEAD_BYTES",
    "STAGES",
    "PipelineError",
    "make_dataset",
    "plan_shuffle_buffer",
]

log = logging.getLogger(__name__)

# Stage names in order; prefixes of this list are what `bench` measures.
STAGES = (
    "read",
    "cache_records",
    "shuffle",
    "repeat",
    "batch",
    "parse",
    "preprocess",
    "cache",
    "prefetch",
)


def _autotune(value: int | str) -> int:
    # TensorFlow is imported on first use so that `import tfperf` and `tfperf --help` stay fast.
    import tensorflow as tf

    return tf.data.AUTOTUNE if value == "auto" else int(value)


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
    remote: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
    keep_remainder: bool = False,
) -> tf.data.Dataset:
    """The tuned input pipeline over TFRecord `files`.

    parse: batched parse of a [B] string tensor (Schema.parse_batch);
    parse_one: per-example parse, used when options.parse == 'per_example';
    preprocess: whole-batch function -> (features, labels); preprocess_example: the
    per-example variant (mapped before batch) for workloads that need it;
    records: total record count (manifest) for the shuffle RAM budget;
    batch_size: overrides options.batch_size (e.g. the per-replica batch);
    stop_after: return the pipeline cut after that stage (see STAGES). In per-example mode
    the order is parse -> preprocess -> batch, so "batch" and "parse" both give unbatched
    parsed examples. remote: applied before the final prefetch (pipeline.service: the
    stages so far then run on tf.data service workers). keep_remainder: training batches
    keep an epoch's partial last batch (the service's epochs are rebatched by the client).
    """
    if stop_after is not None and stop_after not in STAGES:
        raise PipelineError(f"stop_after: expected one of {list(STAGES)}, found '{stop_after}'")
    if not files:
        raise PipelineError("no shard files to read (is the split empty?)")
    deterministic = (not training) if options.deterministic is None else options.deterministic
    p = _Pipeline(
        files=tuple(files),
        options=options,
        training=training,
        deterministic=deterministic,
        batch=batch_size or options.batch_size,
        drop_remainder=training and not keep_remainder,
        compression=compression,
        records=records,
        input_context=input_context,
        parse=parse,
        parse_one=parse_one,
        preprocess=preprocess,
        preprocess_example=preprocess_example,
    )
    ds = None
    for stage, apply in _stages(p):
        if stage == "prefetch" and remote is not None:
            ds = remote(ds)
        ds = apply(ds, p)
        if stop_after is not None and STAGES.index(stage) >= STAGES.index(stop_after):
            return ds
    return ds


@dataclass(frozen=True)
class _Pipeline:
    """What the stages of one make_dataset call share: its arguments and choices."""

    files: tuple[str, ...]
    options: PipelineConfig
    training: bool
    deterministic: bool
    batch: int
    drop_remainder: bool
    compression: str
    records: int | None
    input_context: Any
    parse: Callable[[Any], dict[str, Any]]
    parse_one: Callable[[Any], dict[str, Any]] | None
    preprocess: Callable[[dict[str, Any]], Any] | None
    preprocess_example: Callable[[dict[str, Any]], Any] | None

    @property
    def seed(self) -> int | None:
        return self.options.seed

    @property
    def workers(self) -> int:
        """Input pipelines (one per worker) that split the data between them."""
        ctx = self.input_context
        return 1 if ctx is None else ctx.num_input_pipelines

    @property
    def parallelism(self) -> int:
        return _autotune(self.options.preprocess_parallelism)

    @property
    def repeat_after_cache(self) -> bool:
        """With cache_preprocessed, training repeats after the cache (see _cache)."""
        opts = self.options
        return bool(opts.cache_preprocessed) and self.training and opts.repeat

    @functools.cached_property
    def record_bytes(self) -> int:
        return record_bytes(self.files, self.records, self.compression)


Stage = Callable[[Any, _Pipeline], Any]  # (dataset, pipeline) -> dataset


def _stages(p: _Pipeline) -> list[tuple[str, Stage]]:
    """The stages in pipeline order, each named by the STAGES entry it ends."""
    middle: list[tuple[str, Stage]] = [
        ("batch", _batch),
        ("parse", _parse_batches),
        ("preprocess", _preprocess_batches),
    ]
    if p.options.parse == "per_example" or p.preprocess_example is not None:
        # Per-example work (only where it must be): parse and map before batching. Here the
        # order is parse -> preprocess -> batch: stopping at batch or parse gives unbatched
        # parsed examples.
        middle = [("parse", _parse_examples), ("preprocess", _preprocess_examples)]
    return [
        ("read", _read),
        ("cache_records", _cache_records),
        ("shuffle", _shuffle_records),
        ("repeat", _repeat),
        *middle,
        ("cache", _cache),
        ("prefetch", _prefetch),
    ]


# ---- read: list shards -> shard by worker -> shuffle file order -> interleave reads -------
def _read(_: None, p: _Pipeline) -> tf.data.Dataset:
    ds = _list_shards(p)
    ds = _shard_files_by_worker(ds, p)
    ds = _shuffle_files(ds, p)
    ds = _interleave_reads(ds, p)
    return _shard_records_by_worker(ds, p)


def _list_shards(p: _Pipeline) -> tf.data.Dataset:
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(list(p.files))


def _shard_files_by_worker(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Each worker reads its own files, so no record is read twice across workers.
    if p.workers <= 1:
        return ds
    if len(p.files) >= p.workers:
        return ds.shard(p.workers, p.input_context.input_pipeline_id)
    log.warning(
        "%d shards for %d input pipelines: sharding records instead of files",
        len(p.files),
        p.workers,
    )
    return ds


def _shuffle_files(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # A new file order each epoch spreads shard-level correlation (training only).
    if p.training and p.options.shuffle_files and len(p.files) > 1:
        return ds.shuffle(len(p.files), seed=p.seed, reshuffle_each_iteration=True)
    return ds


def _interleave_reads(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    import tensorflow as tf

    opts = p.options
    # Several files read at once: hides per-file latency and mixes records across shards.
    cycle = min(len(p.files), 16) if opts.interleave_cycle == "auto" else opts.interleave_cycle
    skip_corrupt = opts.on_corrupt == "skip"
    # Records leave the reader threads in blocks (training): the parallel interleave hands
    # each element from thread to thread (~3 CPU-us, measured), which for small records
    # costs more than reading them; ~1 MB blocks cut reading to ~1 CPU-us per record,
    # kept small beside a small shuffle buffer so that it still mixes shards.
    # Evaluation keeps its exact record-by-record order.
    block = 1 if p.deterministic else read_block(p.record_bytes, opts.shuffle_buffer)

    def read_file(f: Any) -> Any:
        records = tf.data.TFRecordDataset(
            f, compression_type=p.compression or None, buffer_size=8 * 2**20
        )
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
        block_length=1 if p.deterministic or block > 1 else 16,
        num_parallel_calls=_autotune(opts.read_parallelism),
        deterministic=p.deterministic,
    )
    return ds.unbatch() if block > 1 else ds  # back to records, for the record shuffle


def _shard_records_by_worker(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Fewer files than workers: each worker keeps every n-th record instead.
    if p.workers > 1 and len(p.files) < p.workers:
        return ds.shard(p.workers, p.input_context.input_pipeline_id)
    return ds


# ---- records: [cache] -> shuffle -> repeat -------------------------------------------------
def _cache_records(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Raw records are cheap to keep: caching here saves disk reads, keeps shuffling fresh.
    cache = p.options.cache_records
    if cache:
        return ds.cache("" if cache is True else str(cache))
    return ds


def _shuffle_records(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Shuffle records within a RAM budget: an oversized buffer makes the machine swap.
    opts = p.options
    if not (p.training and opts.shuffle_buffer > 1):
        return ds
    plan = plan_shuffle_buffer(opts.shuffle_buffer, p.record_bytes, opts.shuffle_ram_mb)
    if plan.granted < plan.requested:
        warnings.warn(
            f"pipeline.shuffle_buffer: {plan.requested} records need "
            f"~{plan.requested_bytes / 2**20:.3g} MiB, over pipeline.shuffle_ram_mb "
            f"({opts.shuffle_ram_mb:.3g} MiB); using {plan.granted} records",
            stacklevel=3,  # make_dataset's caller
        )
    if plan.granted > 1:
        return ds.shuffle(plan.granted, seed=p.seed, reshuffle_each_iteration=True)
    return ds


def _repeat(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Repeat before batch so that batches never straddle a short epoch end. With
    # cache_preprocessed the repeat moves after the cache: a cache fed an endless stream
    # never finishes its first epoch, so it only grows and is never read back.
    if p.training and p.options.repeat and not p.repeat_after_cache:
        return ds.repeat()
    return ds


# ---- batches: batch -> parse -> preprocess (or, per example: parse -> preprocess -> batch) --
def _batch(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Batch first: later maps then pay their per-call overhead once per batch.
    return ds.batch(
        p.batch,
        drop_remainder=p.drop_remainder,
        num_parallel_calls=p.parallelism,
        deterministic=p.deterministic,
    )


def _parse_batches(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # One vectorized parse_example for the whole batch.
    return ds.map(p.parse, num_parallel_calls=p.parallelism, deterministic=p.deterministic)


def _preprocess_batches(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # The workload's preprocessing, on whole batches, in parallel.
    if p.preprocess is None:
        return ds
    return ds.map(p.preprocess, num_parallel_calls=p.parallelism, deterministic=p.deterministic)


def _parse_examples(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    import tensorflow as tf

    parse = p.parse
    one = p.parse_one or (lambda s: {k: v[0] for k, v in parse(tf.reshape(s, [1])).items()})
    return ds.map(one, num_parallel_calls=p.parallelism, deterministic=p.deterministic)


def _preprocess_examples(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    par, deterministic = p.parallelism, p.deterministic
    if p.preprocess_example is not None:
        ds = ds.map(p.preprocess_example, num_parallel_calls=par, deterministic=deterministic)
    ds = ds.batch(p.batch, drop_remainder=p.drop_remainder)
    if p.preprocess is not None and p.preprocess_example is None:
        # Whole-batch preprocessing (e.g. the label split) still runs after a per-example parse.
        ds = ds.map(p.preprocess, num_parallel_calls=par, deterministic=deterministic)
    return ds


# ---- output: [cache] -> prefetch -----------------------------------------------------------
def _cache(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    # Caching after preprocessing replays deterministic work for free in later epochs;
    # it freezes the order within the cache, so the caller opts in.
    cache = p.options.cache_preprocessed
    if not cache:
        return ds
    path = "" if cache is True else str(cache)
    if not path and p.records:
        # stacklevel 4: the warning names make_dataset's caller.
        warn_if_cache_exceeds_ram(ds.element_spec, p.records / p.batch, stacklevel=4)
    ds = ds.cache(path)
    if p.training:
        ds = ds.shuffle(64, seed=p.seed)  # reorders cached batches each epoch
    if p.repeat_after_cache:
        ds = ds.repeat()  # epoch 1 fills the cache, later epochs replay it
    return ds


def _prefetch(ds: tf.data.Dataset, p: _Pipeline) -> tf.data.Dataset:
    import tensorflow as tf

    # Prefetch overlaps input with the step that consumes it.
    ds = ds.prefetch(_autotune(p.options.prefetch))
    opts = tf.data.Options()
    opts.deterministic = p.deterministic
    opts.autotune.enabled = True  # also feeds get_model_proto (input/* metrics)
    return ds.with_options(opts)
