"""The run file's data section turned into datasets: which shards, which schema, which
preprocessing (a built-in workload's, or none), tuned or original, or a user's own
`module:function` pipeline. Commands call `make_input_dataset`; data/pipeline.py owns
the stage order.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig
from tfperf.data.corrupt_shards import skipped_records
from tfperf.data.manifest import Manifest, ManifestError, load_manifest, manifest_path
from tfperf.data.pipeline import make_dataset
from tfperf.errors import UserError
from tfperf.inputs.epoch_count import EpochCounter
from tfperf.inputs.service import (
    check_sharing,
    distributed_options,
    service_applies,
    to_service,
    user_pipeline_to_service,
)
from tfperf.inputs.user_code import call_user
from tfperf.util.format import cut, quoted
from tfperf.util.imports import load_object
from tfperf.workloads import Workload, get_workload

if TYPE_CHECKING:
    import tensorflow as tf


@dataclass
class InputSource:
    """Everything needed to read one run file's data."""

    root: Path
    manifest: Manifest
    workload: Workload | None

    on_corrupt: str = "error"  # pipeline.on_corrupt: "error" also checks each shard's size

    def files(self, split: str) -> list[str]:
        check = self.on_corrupt == "error"  # under "skip" the lost records are reported
        return self.manifest.readable_shard_paths(self.root, split, check_sizes=check)

    def records(self, split: str) -> int:
        return self.manifest.splits[split].records


def data_dir(cfg: RunConfig) -> Path:
    """data.dir from the run file; built-in workloads default to runs/<workload>/data."""
    if cfg.data.dir:
        return Path(cfg.resolve(cfg.data.dir) or cfg.data.dir)
    if cfg.workload:
        return Path("runs") / cfg.workload / "data"
    raise UserError("data.dir: expected a directory with manifest.json, found nothing set")


def workload_of(cfg: RunConfig) -> Workload | None:
    if not cfg.workload:
        return None
    try:
        return get_workload(cfg.workload, **cfg.workload_options)
    except (TypeError, ValueError) as exc:  # an unknown knob or a value the workload rejects
        raise UserError(f"workload_options for '{cfg.workload}': {exc}") from None


def ensure_workload_data(cfg: RunConfig, *, progress: bool = True) -> Path:
    """Generates and converts a built-in workload's data when its manifest is missing."""
    root = data_dir(cfg)
    if manifest_path(root).exists():
        return root
    workload = workload_of(cfg)
    if workload is None:
        return root
    # The writer (worker pool, readers) is imported on first use: only a missing dataset
    # needs it, and `tfperf --help` imports this module.
    from tfperf.inputs.workload_data import write_workload_data

    write_workload_data(
        workload,
        root,
        examples=cfg.data.examples,
        eval_examples=cfg.data.eval_examples,
        seed=cfg.data.seed,
        progress=progress,
    )
    return root


def open_source(cfg: RunConfig) -> InputSource:
    root = data_dir(cfg)
    try:
        manifest = load_manifest(root)
    except ManifestError:
        if cfg.workload:
            raise UserError(
                f"{manifest_path(root)}: no data yet; run `tfperf convert --workload "
                f"{cfg.workload} --out {root}` (or any command with --make-data)"
            ) from None
        raise
    return InputSource(
        root=root,
        manifest=manifest,
        workload=workload_of(cfg),
        on_corrupt=cfg.pipeline.on_corrupt,
    )


@dataclass(frozen=True)
class SplitShards:
    """The shards one pipeline reads, with the manifest's counts (bench, corrupt checks)."""

    split: str
    files: list[str]
    records: list[int]  # per shard, from the manifest
    bytes: int  # serialized bytes of all shards, from the manifest
    compression: str

    @property
    def total_records(self) -> int:
        return sum(self.records)

    @property
    def record_bytes(self) -> float:
        """Mean serialized bytes per record (what MB/s figures count)."""
        return self.bytes / max(1, self.total_records)


def split_shards(
    cfg: RunConfig, *, training: bool, split: str | None = None, variant: str | None = None
) -> SplitShards | None:
    """The shards `make_input_dataset` would read with the same arguments; None for a
    user's own data.pipeline (tfperf does not know its files)."""
    if cfg.data.pipeline:
        return None
    src = open_source(cfg)
    split = split or (cfg.data.train_split if training else cfg.data.eval_split)
    wl = src.workload
    if (variant or cfg.data.variant) == "original" and wl is not None and wl.original_needs_raw:
        split = wl.raw_split(split)
    files = src.files(split)  # raises a ManifestError naming the missing split
    info = src.manifest.splits[split]
    return SplitShards(
        split=split,
        files=files,
        records=[s.records for s in info.shards],
        bytes=sum(s.bytes for s in info.shards),
        compression=src.manifest.compression,
    )


def skipped_per_epoch(cfg: RunConfig, *, training: bool = True, split: str | None = None) -> int:
    """Records that pipeline.on_corrupt=skip drops in each epoch of this run file's split
    (0 when every shard reads to its end). One scan of the shards: call it once, when an
    epoch ends, and report the same count for later epochs (the drop never changes)."""
    sh = split_shards(cfg, training=training, split=split)
    if sh is None:
        return 0
    return sum(skipped_records(sh.files, sh.records, sh.compression).values())


def _call_user_pipeline(fn: Any, spec: str, source: str | None, **kwargs: Any) -> Any:
    # Pass only the arguments the user's function declares.
    doing = f"building the {'training' if kwargs.get('training') else 'evaluation'} dataset"
    params = inspect.signature(fn).parameters
    if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return call_user(fn, "data.pipeline", spec, doing, source, **kwargs)


def with_input_threads(ds: tf.data.Dataset, threads: int) -> tf.data.Dataset:
    """`ds` run on a private pool of `threads` threads (each op on one of them), so that a
    model training on the same CPU keeps the other cores."""
    import tensorflow as tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)


def make_input_dataset(
    cfg: RunConfig,
    *,
    training: bool,
    split: str | None = None,
    variant: str | None = None,
    input_context: Any = None,
    batch_size: int | None = None,
    stop_after: str | None = None,
    epoch_counter: EpochCounter | None = None,
) -> tf.data.Dataset:
    """(features, labels) batches for the run file: tuned, original or the user's own.
    With pipeline.service on, the whole pipeline (not a stop_after prefix) runs on the
    service's workers up to its final prefetch, and the service, not `input_context`,
    splits the data between trainer processes; `epoch_counter` counts the examples each
    distributed_epoch training epoch delivered (tfperf's own pipeline only). A fixed
    pipeline.threads runs it on its own pool of that many threads."""
    ds = _input_dataset(
        cfg,
        training=training,
        split=split,
        variant=variant,
        input_context=input_context,
        batch_size=batch_size,
        stop_after=stop_after,
        epoch_counter=epoch_counter,
    )
    threads = cfg.pipeline.threads
    return ds if threads == "auto" else with_input_threads(ds, int(threads))


def _input_dataset(
    cfg: RunConfig,
    *,
    training: bool,
    split: str | None = None,
    variant: str | None = None,
    input_context: Any = None,
    batch_size: int | None = None,
    stop_after: str | None = None,
    epoch_counter: EpochCounter | None = None,
) -> tf.data.Dataset:
    # TensorFlow is imported on first use so that `import tfperf` and `tfperf --help` stay fast.
    import tensorflow as tf

    split = split or (cfg.data.train_split if training else cfg.data.eval_split)
    batch = batch_size or cfg.pipeline.batch_size
    served = service_applies(cfg, stop_after)
    if served:
        check_sharing(cfg.pipeline.service, input_context, training)
        input_context = None
    if cfg.data.pipeline:
        here = str(Path(cfg.source).parent) if cfg.source else None
        fn = load_object(cfg.data.pipeline, field="data.pipeline", search_dir=here)
        ds = _call_user_pipeline(
            fn,
            cfg.data.pipeline,
            cfg.source,
            training=training,
            batch_size=batch,
            split=split,
            input_context=input_context,
            config=cfg,
        )
        if not isinstance(ds, tf.data.Dataset):
            raise UserError(
                f"data.pipeline: {cfg.data.pipeline} must return a tf.data.Dataset, "
                f"found {type(ds).__name__}"
            )
        spec = f"data.pipeline {cfg.data.pipeline}"
        return user_pipeline_to_service(ds, cfg, training=training, spec=spec) if served else ds
    src = open_source(cfg)
    wl = src.workload
    variant = variant or cfg.data.variant
    if variant == "original":
        if wl is None:
            raise UserError("data.variant: 'original' needs a built-in workload (set workload)")
        orig_split = wl.raw_split(split) if wl.original_needs_raw else split
        files = src.files(orig_split)
        seed = cfg.pipeline.seed
        ds = wl.original_dataset(files, batch, training=training, seed=seed)
        if not served:
            return ds
        spec = f"workload {cfg.workload}'s original pipeline"
        return user_pipeline_to_service(ds, cfg, training=training, spec=spec)
    schema = src.manifest.split_schema(split)  # a split may have its own (raw splits)
    preprocess = wl.preprocess_batch if wl and not wl.per_example else None
    if wl is None and cfg.data.label:
        if cfg.data.label not in schema.names:
            raise UserError(
                f"data.label: expected one of {cut(', '.join(schema.names))}, found "
                f"{quoted(cfg.data.label)}"
            )
        preprocess = _split_label(cfg.data.label)
    files, options = src.files(split), _resolved_pipeline(cfg)
    remote, one_epoch = None, False
    if served:
        files = [str(Path(f).resolve()) for f in files]  # workers run in their own folder
        if not training or cfg.pipeline.service.mode == "distributed_epoch":
            # Training repeats here, one job iteration per epoch (unless pipeline.repeat: false).
            one_epoch = training and options.repeat
            files, options = distributed_options(cfg, files, options, training=training)
        else:  # parallel_epochs: a fixed seed would make every worker serve the same order
            options = options.model_copy(update={"seed": None})
        remote = functools.partial(
            to_service,
            cfg=cfg,
            training=training,
            batch=batch,
            one_epoch=one_epoch,
            counter=epoch_counter,
        )
    return make_dataset(
        files,
        options,
        training=training,
        parse=schema.parse_batch,
        parse_one=schema.parse_one,
        preprocess=preprocess,
        preprocess_example=wl.preprocess_example if wl and wl.per_example else None,
        compression=src.manifest.compression,
        records=src.records(split),
        input_context=input_context,
        batch_size=batch,
        stop_after=stop_after,
        remote=remote,
        keep_remainder=one_epoch,
    )


def _resolved_pipeline(cfg: RunConfig) -> Any:
    """cfg.pipeline with cache file paths relative to the run file, like every other path."""
    changes = {
        k: cfg.resolve(v)
        for k in ("cache_records", "cache_preprocessed")
        if isinstance(v := getattr(cfg.pipeline, k), str) and v
    }
    return cfg.pipeline.model_copy(update=changes) if changes else cfg.pipeline


def _split_label(label: str) -> Any:
    def split(batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        features = {k: v for k, v in batch.items() if k != label}
        return features, batch[label]

    return split
