"""`convert`: raw rows -> sharded TFRecord + manifest.json, orchestrated from the main
process: open the source, settle the schema and the shard plan (data/shards.py), pick up
an interrupted run (convert_resume.py), let the workers write the shards
(convert_worker.py), then join the rejects and update the manifest. The options live in
convert_options.py, the readers in data/sources/.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tfperf.data.convert_options import (
    ConvertError,
    ConvertOptions,
    PreprocessFactory,
    describe_preprocess,
    load_preprocess,
)
from tfperf.data.convert_resume import Progress, fingerprint, remove_stale, resume_point
from tfperf.data.convert_worker import (
    PreprocessError,
    ShardJob,
    ShardTask,
    apply_preprocess,
    encode_row,
    run_jobs,
    sendable_task,
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
from tfperf.data.sources import RowSource, infer_schema_from_row, open_rows
from tfperf.util.files import write_text_atomic
from tfperf.util.progress import ProgressBar, progress_bar

__all__ = ["ConvertError", "ConvertOptions", "PreprocessFactory", "convert"]


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
    NAME-SPLIT.rejects.jsonl; resume: continue an interrupted run. Returns the updated
    manifest (other splits in out_dir are kept).
    """
    if options is None:
        opts = ConvertOptions(**overrides)
    else:
        opts = dataclasses.replace(options, **overrides) if overrides else options
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    existing = _existing_manifest(out, opts.compression)
    pre_fn, pre_spec = load_preprocess(opts.preprocess), describe_preprocess(opts.preprocess)
    src = open_rows(
        source,
        schema=None if pre_fn else opts.schema,
        image_size=opts.image_size,
        channels=opts.channels,
        classes=_read_labels(out),
    )
    name, split = opts.name or default_name(src.default_name), opts.split
    total = len(src) if opts.max_examples is None else min(len(src), opts.max_examples)
    schema, plan = _schema_and_plan(src, total, opts, pre_fn, pre_spec)

    fp = fingerprint(src, total, schema, pre_spec, opts)
    point = resume_point(out, name, split, fp, plan, existing, opts.resume)
    if point.complete:
        assert existing is not None
        with progress_bar(name, enabled=False, notes_when_disabled=opts.progress) as quiet:
            _show_notes(quiet, point.notes)
        return existing
    progress = point.progress
    existing = _clear_split(out, existing, name, split, progress)
    task, workers = _shard_task(out, src, schema, pre_fn, opts, progress, point.notes)
    jobs = _jobs(src, progress.plan, name, split, set(progress.finished))
    try:
        _write_shards(f"{name}/{split}", total, task, jobs, workers, progress, opts, point.notes)
    except BaseException:
        for p in out.glob(temp_glob(name, split)):
            p.unlink(missing_ok=True)  # this run's unfinished shards; finished ones stay
        raise
    return _finalize(out, existing, src, schema, progress, name, split, opts, pre_spec)


def _clear_split(
    out: Path, existing: Manifest | None, name: str, split: str, progress: Progress
) -> Manifest | None:
    """Removes what an earlier run of the split left, keeping the shards being resumed;
    returns the manifest as it now is on disk."""
    # Leftovers of an interrupted run; old shards of this split go when it is finished.
    parts = {rejects_part_name(name, split, i) for i in progress.finished}
    keep = {p.name for p in out.glob(shard_glob(name, split))} | parts
    remove_stale(out, name, split, keep=keep)
    if existing is not None and split in existing.splits and not progress.finished:
        # The manifest must never list shards that are being rewritten.
        existing = existing.model_copy(deep=True)
        del existing.splits[split]
        save_manifest(existing, out)
    progress.save()
    return existing


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
    samples = []
    for i, row in enumerate(head):
        try:
            samples.append(apply_preprocess(pre_fn, row, i))
        except (RowError, PreprocessError):
            continue  # reported in order by the shard that holds the row
    schema = opts.schema
    if schema is None:
        if pre_fn is None:
            schema = src.infer_schema()
        elif samples:
            schema = infer_schema_from_row(samples[0], f"{pre_spec}: its first output row")
        elif head:
            apply_preprocess(pre_fn, head[0], 0)  # raises the first row's error
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
    existing: Manifest | None,
    src: RowSource,
    schema: Schema,
    progress: Progress,
    name: str,
    split: str,
    opts: ConvertOptions,
    pre_spec: str | None,
) -> Manifest:
    """Joins rejects, adds the split to manifest.json, removes leftovers."""
    shards = [progress.finished[i] for i in range(progress.plan.num_shards)]
    rejects_file = _join_rejects(out, name, split, shards)
    info = SplitInfo(
        shards=[ShardInfo(**{k: v for k, v in s.items() if k != "rejected"}) for s in shards],
        records=sum(s["records"] for s in shards),
        rejected=sum(s["rejected"] for s in shards),
        rejects_file=rejects_file,
    )
    if existing is None or (set(existing.splits) <= {split}):
        manifest = Manifest(
            name=name,
            schema=schema,
            compression=opts.compression,
            splits={split: info},
            source=src.path,
            preprocess=pre_spec,
            workload=opts.workload,
        )
    else:
        manifest = existing.model_copy(deep=True)
        if schema != manifest.schema:
            info.schema_ = schema  # this split's records differ from the manifest's schema
        manifest.splits[split] = info
        manifest.workload = manifest.workload or opts.workload
    if src.classes:
        (out / LABELS_FILE).write_text("\n".join(src.classes) + "\n")
    save_manifest(manifest, out)
    progress.path.unlink(missing_ok=True)
    keep = {s["file"] for s in shards} | ({rejects_file} if rejects_file else set())
    remove_stale(out, name, split, keep)
    return manifest
