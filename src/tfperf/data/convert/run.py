"""`convert`: raw rows -> sharded TFRecord + manifest.json, orchestrated from the main
process: open the source, settle the schema and the shard plan (data/shards.py), pick up
an interrupted run (resume.py), let the workers write the shards
(worker.py), then join the rejects and update the manifest. The options live in
options.py, the readers in data/sources/.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tfperf.data.convert.disk import convert_disk_full
from tfperf.data.convert.lock import make_out, manifest_lock, remove_made, split_lock
from tfperf.data.convert.manifest_merge import (
    DatasetFields,
    check_conflicts,
    merge_split,
    remove_splits,
    split_files,
)
from tfperf.data.convert.options import (
    ConvertError,
    ConvertOptions,
    PreprocessFactory,
    describe_preprocess,
    load_preprocess,
    preprocess_label,
)
from tfperf.data.convert.pool import run_jobs, sendable_task
from tfperf.data.convert.resume import Progress, fingerprint, remove_stale, resume_point
from tfperf.data.convert.worker import (
    PreprocessError,
    ShardJob,
    ShardTask,
    apply_preprocess,
    encode_row,
)
from tfperf.data.manifest import (
    Manifest,
    ShardInfo,
    SplitInfo,
    load_manifest,
    manifest_path,
    save_manifest,
)
from tfperf.data.schema import RowError, Schema
from tfperf.data.shards import (
    LABELS_FILE,
    SAMPLE_ROWS,
    ShardPlan,
    default_name,
    plan_shards,
    records_per_shard,
    rejects_name,
    rejects_part_name,
    shard_glob,
    shard_name,
    temp_glob,
)
from tfperf.data.sources import CsvSource, RowSource, infer_schema_from_row, open_rows
from tfperf.data.tfds_export import write_tfds_metadata
from tfperf.util.disk import NO_SPACE, is_disk_full
from tfperf.util.files import write_text_atomic
from tfperf.util.progress import ProgressBar, progress_bar

__all__ = ["ConvertError", "ConvertOptions", "PreprocessError", "PreprocessFactory", "convert"]


def convert(
    source: Any,
    out_dir: str | Path,
    options: ConvertOptions | None = None,
    **overrides: Any,
) -> Manifest:
    """Converts `source` (a path: .npz/.npy/.csv/.parquet/image folder, or an iterable of
    dict rows) into split `split` of the sharded TFRecord dataset in `out_dir`.

    Options are a ConvertOptions, or its fields as keywords (`schema=`, `split=`,
    `preprocess=`, `workers=`, `resume=`, ...; keywords override `options`). schema: of
    the written records (None: inferred from the source, or from the first preprocessed
    row); preprocess: applied to each row once, here (a callable, 'module:function', or a
    PreprocessFactory that worker processes call to rebuild the function); on_bad_row:
    'error' stops at the first bad row (shards already finished stay), 'skip' writes it to
    NAME-SPLIT.rejects.jsonl; resume: continue an interrupted run; overwrite: replace the
    splits of out_dir whose records have another schema (else refused). Returns the updated
    manifest (other splits in out_dir are kept). The split is locked while it is written
    (another convert of it is refused) and manifest.json is merged under a lock, so that
    converts of different splits into one folder can run at once.
    """
    if options is None:
        opts = ConvertOptions(**overrides)
    else:
        opts = dataclasses.replace(options, **overrides) if overrides else options
    out = Path(out_dir)
    made = make_out(out)
    try:
        with split_lock(out, opts.split):
            return _convert_split(source, out, opts)
    except BaseException:
        remove_made(made)  # only folders this run made and left empty
        raise


def _convert_split(source: Any, out: Path, opts: ConvertOptions) -> Manifest:
    existing = _existing_manifest(out, opts.compression)
    pre_fn, pre_spec = load_preprocess(opts.preprocess), describe_preprocess(opts.preprocess)
    src = open_rows(
        source,
        schema=None if pre_fn else opts.schema,
        image_size=opts.image_size,
        channels=opts.channels,
        classes=_read_labels(out),
        column_types=opts.column_types,
        seed=opts.seed,
    )
    name, split = opts.name or default_name(src.default_name), opts.split
    opts = _typed_as_dataset(src, out, existing, opts, pre_fn is not None)
    total = len(src) if opts.max_examples is None else min(len(src), opts.max_examples)
    schema, plan = _schema_and_plan(src, total, opts, pre_fn, pre_spec)
    replaced = []
    if existing is not None:
        replaced = check_conflicts(out, existing, split, schema, opts.workload, opts.overwrite)

    fp = fingerprint(src, total, schema, pre_spec, opts)
    point = resume_point(out, name, split, fp, plan, existing, opts.resume)
    notes = src.notes + point.notes
    if point.complete:
        assert existing is not None
        with progress_bar(name, enabled=False, notes_when_disabled=opts.progress) as quiet:
            _show_notes(quiet, notes)
        return existing
    progress = point.progress
    try:
        _clear_split(out, name, split, progress, opts, replaced)
        task, workers = _shard_task(out, src, schema, pre_fn, opts, progress, notes)
        jobs = _jobs(src, progress.plan, name, split, set(progress.finished))
        try:
            _write_shards(f"{name}/{split}", total, task, jobs, workers, progress, opts, notes)
        except BaseException:
            for p in out.glob(temp_glob(name, split)):
                p.unlink(missing_ok=True)  # this run's unfinished shards; finished ones stay
            if not progress.finished:
                progress.path.unlink(missing_ok=True)  # nothing a --resume could keep
            raise
        fields = DatasetFields(
            name, opts.compression, src.path, pre_spec, opts.workload, opts.tfds_metadata
        )
        return _finalize(out, src, schema, progress, split, opts, fields)
    except OSError as exc:  # here or in a worker (on_done re-raises it)
        if is_disk_full(exc):
            raise convert_disk_full(out, split, progress, opts.shard_bytes) from None
        raise


def _typed_as_dataset(
    src: RowSource, out: Path, existing: Manifest | None, opts: ConvertOptions, pre: bool
) -> ConvertOptions:
    """A CSV converted beside a dataset's splits is typed as that dataset when it has the
    same columns (CsvSource.adopt); the options then carry that schema."""
    if existing is None or pre or opts.schema is not None or opts.overwrite:
        return opts
    split = opts.split
    known = existing.split_schema(split) if split in existing.splits else existing.schema
    if isinstance(src, CsvSource) and src.adopt(known, str(out)):
        return dataclasses.replace(opts, schema=known)
    return opts


def _clear_split(
    out: Path, name: str, split: str, progress: Progress, opts: ConvertOptions, replaced: list[str]
) -> None:
    """Removes what an earlier run of the split left (keeping the shards being resumed)
    and the splits --overwrite replaces; the manifest, re-read under its lock, stops
    listing them before any shard is rewritten."""
    # Leftovers of an interrupted run; old shards of this split go when it is finished.
    parts = {rejects_part_name(name, split, i) for i in progress.finished}
    keep = {p.name for p in out.glob(shard_glob(name, split))} | parts
    remove_stale(out, name, split, keep=keep)
    with manifest_lock(out):
        current = _existing_manifest(out, opts.compression)
        if current is not None:
            m = remove_splits(out, current, [s for s in replaced if s in current.splits])
            if split in m.splits and not progress.finished:
                for f in split_files(m.splits.pop(split)):
                    if not f.startswith(f"{name}-{split}."):
                        (out / f).unlink(missing_ok=True)  # another --name: never listed again
            if m != current:
                save_manifest(m, out)
    progress.save()


def _shard_task(
    out: Path,
    src: RowSource,
    schema: Schema,
    pre_fn: Callable[[Any], Any] | None,
    opts: ConvertOptions,
    progress: Progress,
    notes: list[str],
) -> tuple[ShardTask, int]:
    """The task the shard writers share and how many processes write; one process (with a
    note) when the task cannot be sent to others."""
    workers = opts.worker_count(progress.plan.num_shards - len(progress.finished))
    # In this process the function object itself is used; workers get what pickles.
    task = ShardTask(
        str(out),
        src.path,
        src if src.random_access else None,
        schema,
        pre_fn,
        opts.compression,
        opts.on_bad_row,
        preprocess_label(opts.preprocess),
    )
    if workers <= 1:
        return task, workers
    sendable, reason = sendable_task(task, opts.preprocess)
    if sendable is None:
        notes.append(
            f"preprocess/source cannot be sent to worker processes ({reason}); "
            f"converting in this process"
        )
        return task, 1
    return sendable, workers


def _write_shards(
    label: str,
    total: int,
    task: ShardTask,
    jobs: Iterator[ShardJob],
    workers: int,
    progress: Progress,
    opts: ConvertOptions,
    notes: list[str],
) -> None:
    """Runs the jobs under the progress bar (notes above it), recording each finished
    shard in the progress file as it comes."""

    def on_done(res: dict[str, Any]) -> None:
        if res.get("disk_full"):
            raise OSError(errno.ENOSPC, NO_SPACE, res["path"])  # named by _convert_split
        if "error" in res:
            if res["user"]:
                raise ConvertError(res["error"])
            raise RuntimeError(f"shard {res['index']} failed in a worker:\n{res['error']}")
        progress.add(res["index"], {k: v for k, v in res.items() if k != "index"})

    with progress_bar(
        label, total=total, completed=progress.done_rows, unit="records", enabled=opts.progress
    ) as bar:
        _show_notes(bar, notes)
        run_jobs(task, jobs, workers, on_done, bar.advance)


def _existing_manifest(out: Path, compression: str) -> Manifest | None:
    """The manifest already in `out`, if any; its shards' compression must match."""
    existing = load_manifest(out) if manifest_path(out).exists() else None
    if existing is not None and existing.compression != compression:
        raise ConvertError(
            f"{manifest_path(out)}: holds shards with compression "
            f"{existing.compression or 'none'!r}; convert with the same --compression "
            f"or into another --out"
        )
    return existing


def _read_labels(out: Path) -> list[str] | None:
    p = out / LABELS_FILE
    return p.read_text().splitlines() if p.exists() else None


def _schema_and_plan(
    src: RowSource,
    total: int,
    opts: ConvertOptions,
    pre_fn: Callable[[Any], Any] | None,
    pre_spec: str | None,
) -> tuple[Schema, ShardPlan]:
    """The output schema and the shard plan, from the first rows (preprocessed, encoded)."""
    head = src.head(min(total, SAMPLE_ROWS))
    samples, failed = [], None
    for i, row in enumerate(head):
        try:
            samples.append(apply_preprocess(pre_fn, row, i, preprocess_label(opts.preprocess)))
        except RowError:
            continue  # reported in order by the shard that holds the row
        except PreprocessError as exc:
            failed = failed or exc  # likewise, unless no row gets through
    schema = opts.schema
    if schema is None:
        if pre_fn is None:
            schema = src.infer_schema()
        elif samples:
            schema = infer_schema_from_row(samples[0], f"{pre_spec}: its first output row")
        elif failed is not None:
            i = failed.index
            raise PreprocessError(i, failed.name, failed.problem, src.locate(i), src.path)
    if schema is None:
        raise ConvertError(f"{src.path}: no rows to infer a schema from; give a schema")
    sizes = []
    for i, row in enumerate(samples):
        with contextlib.suppress(RowError):
            sizes.append(len(encode_row(schema, row, i)))
    return schema, plan_shards(total, records_per_shard(sizes, opts.shard_bytes))


def _show_notes(bar: ProgressBar, notes: list[str]) -> None:
    for n in notes:
        bar.note(f"[dim]{n}[/]")


def _jobs(
    src: RowSource, plan: ShardPlan, name: str, split: str, skip: set[int]
) -> Iterator[ShardJob]:
    """Jobs in shard order; iterables are read here, once, and their rows sent along."""
    rows = None if src.random_access else src.iterate()
    for span in plan.spans:
        chunk = None
        if rows is not None:
            chunk = list(itertools.islice(rows, span.rows))
            if len(chunk) < span.rows:
                raise ConvertError(
                    f"{src.path}: ended after {span.start + len(chunk)} rows; "
                    f"expected {plan.num_rows}"
                )
        if span.index in skip:
            continue
        file = shard_name(name, split, span.index, plan.num_shards)
        part = rejects_part_name(name, split, span.index)
        yield ShardJob(span.index, span.start, span.stop, file, part, chunk)


def _join_rejects(out: Path, name: str, split: str, shards: list[dict[str, Any]]) -> str | None:
    """Joins the per-shard rejects into NAME-SPLIT.rejects.jsonl; its name, or None."""
    final = rejects_name(name, split)
    if not any(s["rejected"] for s in shards):
        (out / final).unlink(missing_ok=True)
        return None
    parts = [rejects_part_name(name, split, i) for i, s in enumerate(shards) if s["rejected"]]
    write_text_atomic(out / final, "".join((out / p).read_text() for p in parts))
    return final


def _finalize(
    out: Path,
    src: RowSource,
    schema: Schema,
    progress: Progress,
    split: str,
    opts: ConvertOptions,
    fields: DatasetFields,
) -> Manifest:
    """Joins rejects, merges the split into manifest.json as it is now on disk (another
    convert may have added a split meanwhile), removes leftovers."""
    name = fields.name
    shards = [progress.finished[i] for i in range(progress.plan.num_shards)]
    rejects_file = _join_rejects(out, name, split, shards)
    info = SplitInfo(
        shards=[ShardInfo(**{k: v for k, v in s.items() if k != "rejected"}) for s in shards],
        records=sum(s["records"] for s in shards),
        rejected=sum(s["rejected"] for s in shards),
        rejects_file=rejects_file,
    )
    with manifest_lock(out):
        current = _existing_manifest(out, opts.compression)
        if current is not None:
            # A convert of another split may have finished meanwhile, with another schema.
            again = check_conflicts(out, current, split, schema, opts.workload, opts.overwrite)
            current = remove_splits(out, current, [s for s in again if s != split])
        manifest = merge_split(current, split, info, schema, fields)
        if src.classes:
            write_text_atomic(out / LABELS_FILE, "\n".join(src.classes) + "\n")
        save_manifest(manifest, out)
        if manifest.tfds_metadata:
            write_tfds_metadata(out, manifest)
    progress.path.unlink(missing_ok=True)
    keep = {s["file"] for s in shards} | ({rejects_file} if rejects_file else set())
    remove_stale(out, name, split, keep)
    return manifest
