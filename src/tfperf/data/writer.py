"""`convert`: raw rows -> sharded TFRecord + manifest.json. Plans shards purely
(data/shards.py), then worker processes read their own rows, preprocess, validate,
encode and write each shard under a temporary name, renamed when complete. A progress
file lists finished shards (with sha256), so `resume=True` after a crash redoes only the
rest and ends with the same files as an uninterrupted run. Readers live in sources.py.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gzip
import hashlib
import itertools
import json
import multiprocessing as mp
import os
import pickle
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    DEFAULT_SHARD_BYTES,
    ShardPlan,
    plan_shards,
    progress_name,
    records_per_shard,
    rejects_name,
    rejects_part_name,
    shard_name,
    temp_name,
)
from tfperf.data.sources import (
    BadValue,
    IterableSource,
    RowSource,
    infer_schema_from_row,
    open_rows,
)
from tfperf.data.verify import file_sha256, frame
from tfperf.errors import UserError
from tfperf.util.files import write_text_atomic
from tfperf.util.imports import load_object

SAMPLE_ROWS = 32  # rows encoded up front to estimate records per shard
LABELS_FILE = "labels.txt"  # class names of an image folder, line i = class index i
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")  # no '-': it separates NAME and SPLIT
_COMPRESSIONS = {"": "", "none": "", "gzip": "GZIP"}


class ConvertError(UserError):
    """A conversion that cannot go on; the message names the source, row or option."""


@dataclass
class _Task:
    """What every shard of one run shares; sent once to each worker process."""

    out_dir: str
    where: str  # the source, for messages
    source: RowSource | None  # None: rows come inside each job (iterables)
    schema: Schema
    preprocess: Any  # a callable, a 'module:function' string, a WorkloadRef, or None
    compression: str
    on_bad_row: str


@dataclass
class _Job:
    index: int
    start: int
    stop: int
    file: str
    rejects_part: str
    rows: list[Any] | None = None


# ---- the worker side -----------------------------------------------------------------
_TASK: _Task | None = None
_PRE: Callable[[Any], Any] | None = None
_TICK: Callable[[int], None] = lambda n: None  # noqa: E731


class _BadRow(Exception):
    pass


class _UserCodeError(Exception):
    pass


def _init_worker(task: _Task, queue: Any) -> None:
    global _TICK
    with contextlib.suppress(Exception):
        # Die with the parent: a killed convert must not leave writers behind (Linux).
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _set_task(task)
    _TICK = queue.put


def _set_task(task: _Task) -> None:
    global _TASK, _PRE
    _TASK = task
    _PRE = _load_preprocess(task.preprocess)


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


def _load_preprocess(pre: Any) -> Callable[[Any], Any] | None:
    """The function itself from what a task carries (in a worker: rebuilt from a name)."""
    if isinstance(pre, str):
        return load_object(pre, field="--preprocess")
    if isinstance(pre, PreprocessFactory):
        return pre.build()
    return pre


class _HashingSink:
    """A write-only file wrapper that hashes and counts the bytes that reach the disk."""

    def __init__(self, f: Any):
        self.f, self.sha, self.bytes = f, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.bytes += len(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def _short_repr(row: Any, limit: int = 2000) -> str:
    text = repr(row)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _encode(schema: Schema, row: Any, index: int) -> bytes:
    if not isinstance(row, dict):
        raise RowError(index, "(row)", "a dict of features", type(row).__name__)
    for k, v in row.items():
        if v is None:
            raise RowError(index, str(k), "a value", "an empty cell / null")
        if isinstance(v, BadValue):
            raise RowError(index, str(k), v.expected, v.found)
    return schema.encode(row, index)


def _preprocess(row: Any, index: int) -> Any:
    if _PRE is None:
        return row
    try:
        out = _PRE(row)
    except RowError:
        raise
    except Exception as exc:
        tb = "".join(traceback.format_exception(exc)[-3:]).rstrip()
        raise _UserCodeError(f"row {index}: the preprocess function raised:\n{tb}") from None
    if not isinstance(out, dict):
        raise _UserCodeError(
            f"row {index}: the preprocess function must return a dict of features, "
            f"found {type(out).__name__}"
        )
    return out


def _write_shard(job: _Job) -> dict[str, Any]:
    """Writes one shard (tmp name, fsync, rename) and returns its ShardInfo fields."""
    task = _TASK
    assert task is not None
    out = Path(task.out_dir)
    final, tmp = out / job.file, out / temp_name(job.file, os.getpid())
    rows: Iterable[Any] = job.rows if job.rows is not None else []
    if job.rows is None and task.source is not None:
        rows = task.source.read(job.start, job.stop)
    records, seen, rejects, unticked = 0, 0, [], 0
    with open(tmp, "wb") as raw:
        sink = _HashingSink(raw)
        # mtime=0 and no file name: a GZIP shard's bytes depend on its records only.
        stream: Any = (gzip.GzipFile(fileobj=sink, mode="wb", mtime=0, filename="",  # type: ignore[arg-type]
                                     compresslevel=6)
                       if task.compression == "GZIP" else sink)  # fmt: skip
        for offset, row in enumerate(rows):
            index, seen = job.start + offset, seen + 1
            try:
                data = _encode(task.schema, _preprocess(row, index), index)
            except RowError as exc:
                if task.on_bad_row == "error":
                    raise _BadRow(f"{task.where}: {exc}") from None
                rejects.append(json.dumps({"row": index, "error": str(exc),
                                           "repr": _short_repr(row)}))  # fmt: skip
                continue
            finally:
                unticked += 1
                if unticked >= 256:
                    _TICK(unticked)
                    unticked = 0
            stream.write(frame(data))
            records += 1
        if stream is not sink:
            stream.close()  # writes the gzip trailer; the file itself stays open
        raw.flush()
        os.fsync(raw.fileno())  # the rename below must never expose a half-written shard
    _TICK(unticked)
    if seen != job.stop - job.start:
        os.unlink(tmp)
        raise _BadRow(f"{task.where}: expected rows {job.start}..{job.stop - 1}, "
                      f"the source ended after {seen} of them")  # fmt: skip
    if rejects:
        part = out / job.rejects_part
        part_tmp = part.with_name(temp_name(part.name, os.getpid()))
        part_tmp.write_text("\n".join(rejects) + "\n")
        os.replace(part_tmp, part)  # before the shard: a finished shard has its rejects
    os.replace(tmp, final)
    return {"index": job.index, "file": job.file, "records": records, "bytes": sink.bytes,
            "sha256": sink.sha.hexdigest(), "first_row": job.start,
            "rejected": len(rejects)}  # fmt: skip


def _run_job(job: _Job) -> dict[str, Any]:
    """A job's result, or its error as text (exceptions do not always pickle)."""
    try:
        return _write_shard(job)
    except (_BadRow, _UserCodeError, UserError) as exc:
        where = "" if isinstance(exc, _BadRow) else f"{_TASK.where if _TASK else ''}: "
        return {"index": job.index, "error": f"{where}{exc}", "user": True}
    except Exception:
        return {"index": job.index, "error": traceback.format_exc(), "user": False}


# ---- the main process ------------------------------------------------------------------
class _Bar:
    """A rich progress bar with records/s on stderr, or nothing when disabled."""

    def __init__(self, enabled: bool, total: int, label: str):
        self.enabled, self.total, self.label = enabled, total, label
        self.progress: Any = None

    def __enter__(self) -> _Bar:
        if self.enabled:
            from rich import progress as rp
            from rich.console import Console

            self.progress = rp.Progress(
                rp.TextColumn("{task.description}"), rp.BarColumn(), rp.MofNCompleteColumn(),
                rp.TextColumn("{task.fields[rate]} records/s"), rp.TimeElapsedColumn(),
                rp.TimeRemainingColumn(), console=Console(stderr=True), transient=False,
            )  # fmt: skip
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=self.total, rate="-")
        return self

    def advance(self, n: int) -> None:
        if self.progress is not None and n:
            self.progress.advance(self.task, n)
            speed = self.progress.tasks[0].speed
            self.progress.update(self.task, rate=f"{speed:,.0f}" if speed else "-")

    def note(self, text: str) -> None:
        if self.enabled:
            from rich.console import Console

            (self.progress.console if self.progress else Console(stderr=True)).print(text)

    def __exit__(self, *exc: Any) -> None:
        if self.progress is not None:
            self.progress.stop()


def _compression(value: str | None) -> str:
    key = (value or "").lower()
    if key not in _COMPRESSIONS:
        raise ConvertError(f"--compression: expected 'gzip' or none, found {value!r}")
    return _COMPRESSIONS[key]


def _resolve_preprocess(preprocess: Any) -> tuple[Callable[[Any], Any] | None, str | None]:
    """(the function to call here, its description for the manifest and resume checks)."""
    if preprocess is None:
        return None, None
    if isinstance(preprocess, str):
        return load_object(preprocess, field="--preprocess"), preprocess
    if isinstance(preprocess, PreprocessFactory):
        return preprocess.build(), preprocess.description
    if not callable(preprocess):
        raise ConvertError(f"preprocess: expected a callable, 'module:function' or "
                           f"('workload', name, options), found {preprocess!r}")  # fmt: skip
    return preprocess, f"{preprocess.__module__}:{getattr(preprocess, '__qualname__', '?')}"


def _task_for_workers(task: _Task, preprocess: Any) -> tuple[_Task | None, str]:
    """`task` as spawned workers can receive it, or None with the reason they cannot.

    The function object is sent when it pickles; otherwise what workers can load or
    rebuild it from (a 'module:function' name, a built-in workload's name and options).
    """
    if isinstance(preprocess, str):
        tries = [preprocess]  # a name the user gave: workers import it as written
    elif isinstance(preprocess, PreprocessFactory):
        tries = [task.preprocess, preprocess]
    else:
        tries = [task.preprocess]  # a plain callable has no name to fall back to
    reason = ""
    for pre in tries:
        candidate = dataclasses.replace(task, preprocess=pre)
        try:
            pickle.dumps(candidate)
        except Exception as exc:  # noqa: BLE001 - any pickling failure means "send it otherwise"
            reason = str(exc)
            continue
        return candidate, ""
    return None, reason


def _save_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def _remove_stale(out: Path, name: str, split: str, keep: set[str] = frozenset()) -> None:  # type: ignore[assignment]
    """Deletes leftovers of this split: temporary files, rejects parts, old shards."""
    prefix = f"{name}-{split}."
    for p in out.iterdir():
        n = p.name
        ours = n.startswith((prefix, "." + prefix))
        if ours and n not in keep and (".tmp-" in n or ".tfrecord-" in n or ".rejects-" in n):
            p.unlink(missing_ok=True)


def _shard_files(out: Path, name: str, split: str) -> set[str]:
    return {p.name for p in out.glob(f"{name}-{split}.tfrecord-*")}


def _read_labels(out: Path) -> list[str] | None:
    p = out / LABELS_FILE
    return p.read_text().splitlines() if p.exists() else None


def _head(src: RowSource, n: int) -> list[Any]:
    if isinstance(src, IterableSource):
        return src.peek(n)
    return list(src.read(0, n))


def convert(
    source: Any,
    out_dir: str | Path,
    *,
    schema: Schema | None = None,
    name: str | None = None,
    split: str = "train",
    preprocess: Callable[[dict[str, Any]], dict[str, Any]] | str | tuple | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    workers: int | None = None,
    compression: str = "",
    resume: bool = False,
    on_bad_row: str = "error",
    max_examples: int | None = None,
    progress: bool = True,
    image_size: tuple[int, int] | None = None,
    channels: int = 3,
    workload: str | None = None,
) -> Manifest:
    """Converts `source` (a path: .npz/.npy/.csv/.parquet/image folder, or an iterable of
    dict rows) into split `split` of the sharded TFRecord dataset in `out_dir`.

    schema: of the written records (None: inferred from the source, or from the first
    preprocessed row); preprocess: applied to each row once, here (a callable,
    'module:function', or a PreprocessFactory that worker processes call to rebuild the
    function); on_bad_row: 'error' stops at
    the first bad row (shards already finished stay), 'skip' writes it to
    NAME-SPLIT.rejects.jsonl; resume: continue an interrupted run. Returns the updated
    manifest (other splits in out_dir are kept).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    comp = _compression(compression)
    if on_bad_row not in ("error", "skip"):
        raise ConvertError(f"--on-bad-row: expected 'error' or 'skip', found {on_bad_row!r}")
    if not _NAME_RE.fullmatch(split):
        raise ConvertError(f"--split: expected letters, digits, '_' or '.', found {split!r}")
    if max_examples is not None and max_examples < 0:
        raise ConvertError(f"--max-examples: expected a number >= 0, found {max_examples}")
    existing = load_manifest(out) if manifest_path(out).exists() else None
    if existing is not None and existing.compression != comp:
        raise ConvertError(
            f"{manifest_path(out)}: holds shards with compression "
            f"{existing.compression or 'none'!r}; convert with the same --compression "
            f"or into another --out"
        )
    pre_fn, pre_spec = _resolve_preprocess(preprocess)
    src = open_rows(source, schema=None if pre_fn else schema, image_size=image_size,
                    channels=channels, classes=_read_labels(out))  # fmt: skip
    name = name or re.sub(r"[^A-Za-z0-9_.]", "_", src.default_name).lstrip("._") or "data"
    if not _NAME_RE.fullmatch(name):
        raise ConvertError(f"--name: expected letters, digits, '_' or '.', found {name!r}")
    total = len(src) if max_examples is None else min(len(src), max_examples)

    # Output schema and records per shard, from the first rows.
    head = _head(src, min(total, SAMPLE_ROWS))
    _set_task(_Task(str(out), src.path, None, schema or _placeholder(), pre_fn,
                    comp, on_bad_row))  # fmt: skip
    samples = []
    for i, row in enumerate(head):
        try:
            samples.append(_preprocess(row, i))
        except (RowError, _UserCodeError):
            continue  # reported in order by the shard that holds the row
    if schema is None:
        if pre_fn is None:
            schema = src.infer_schema()
        elif samples:
            schema = infer_schema_from_row(samples[0], f"{pre_spec}: its first output row")
        elif head:
            _preprocess(head[0], 0)  # raises the first row's error
    if schema is None:
        raise ConvertError(f"{src.path}: no rows to infer a schema from; give a schema")
    sizes = []
    for i, row in enumerate(samples):
        with contextlib.suppress(RowError):
            sizes.append(len(_encode(schema, row, i)))
    plan = plan_shards(total, records_per_shard(sizes, shard_bytes))

    fingerprint = {"source": str(Path(src.path).resolve()) if src.random_access else src.path,
                   "rows": total, "schema": schema.model_dump(mode="json"),
                   "preprocess": pre_spec, "compression": comp,
                   "on_bad_row": on_bad_row}  # fmt: skip
    prog_path = out / progress_name(name, split)
    finished: dict[int, dict[str, Any]] = {}
    notes: list[str] = []
    if resume and prog_path.exists():
        state = json.loads(prog_path.read_text())
        differ = [k for k in fingerprint if state["fingerprint"].get(k) != fingerprint[k]]
        if differ:
            raise ConvertError(
                f"{prog_path}: cannot resume: {', '.join(differ)} differ from the "
                f"interrupted run; rerun without --resume to start over"
            )
        plan = ShardPlan.from_dict(state["plan"])
        for key, info in state["shards"].items():
            path = out / info["file"]
            if path.exists() and file_sha256(path) == (info["sha256"], info["bytes"]):
                finished[int(key)] = info
            else:
                notes.append(f"shard {info['file']}: damaged or missing; writing it again")
        notes.append(f"resuming: {len(finished)} of {plan.num_shards} shards already done")
    elif resume and existing is not None and split in existing.splits:
        from tfperf.data.verify import verify_dir

        bad = [r for r in verify_dir(out, existing).damaged if r.split == split]
        if not bad:
            notes.append(f"split '{split}' is already complete; shards verified")
            _print_notes(notes, progress)
            return existing
        notes.append(f"split '{split}': {len(bad)} damaged shards; converting it again")
    elif resume:
        notes.append("nothing to resume here; starting")
    # Leftovers of an interrupted run; old shards of this split go when it is finished.
    parts = {rejects_part_name(name, split, i) for i in finished}
    _remove_stale(out, name, split, keep=_shard_files(out, name, split) | parts)
    if existing is not None and split in existing.splits and not finished:
        # The manifest must never list shards that are being rewritten.
        existing = existing.model_copy(deep=True)
        del existing.splits[split]
        save_manifest(existing, out)
    state = {"format": "tfperf.progress/1", "fingerprint": fingerprint, "plan": plan.to_dict(),
             "shards": {str(k): v for k, v in finished.items()}}  # fmt: skip
    _save_json(prog_path, state)
    _print_notes(notes, progress)

    jobs = _jobs(src, plan, name, split, set(finished))
    todo = plan.num_shards - len(finished)
    workers = max(1, min(workers or min(4, os.cpu_count() or 1), todo))
    # In this process the function object itself is used; workers get what pickles.
    task = _Task(str(out), src.path, src if src.random_access else None, schema,
                 pre_fn, comp, on_bad_row)  # fmt: skip
    if workers > 1:
        sendable, reason = _task_for_workers(task, preprocess)
        if sendable is None:
            notes = [f"preprocess/source cannot be sent to worker processes ({reason}); "
                     f"converting in this process"]  # fmt: skip
            _print_notes(notes, progress)
            workers = 1
        else:
            task = sendable

    def on_done(res: dict[str, Any]) -> None:
        if "error" in res:
            if res["user"]:
                raise ConvertError(res["error"])
            raise RuntimeError(f"shard {res['index']} failed in a worker:\n{res['error']}")
        finished[res["index"]] = {k: v for k, v in res.items() if k != "index"}
        state["shards"] = {str(k): v for k, v in sorted(finished.items())}
        _save_json(prog_path, state)  # after every shard: --resume knows what is done

    done_rows = sum(plan.spans[i].rows for i in finished)
    label = f"{name}/{split}"
    try:
        with _Bar(progress, total, label) as bar:
            bar.advance(done_rows)
            _execute(task, jobs, workers, on_done, bar)
    except BaseException:
        for p in out.glob(f".{name}-{split}.*.tmp-*"):
            p.unlink(missing_ok=True)  # this run's unfinished shards; finished ones stay
        raise
    return _finalize(out, existing, src, schema, plan, finished, name, split, comp,
                     pre_spec, workload, prog_path)  # fmt: skip


def _placeholder() -> Schema:
    from tfperf.data.schema import Feature

    return Schema.of(Feature(name="_", dtype="int64"))


def _print_notes(notes: list[str], progress: bool) -> None:
    if progress and notes:
        from rich.console import Console

        for n in notes:
            Console(stderr=True).print(f"[dim]{n}[/]")


def _jobs(src: RowSource, plan: ShardPlan, name: str, split: str, skip: set[int]
          ) -> Iterator[_Job]:  # fmt: skip
    """Jobs in shard order; iterables are read here, once, and their rows sent along."""
    rows = None if src.random_access else src.iterate()
    for span in plan.spans:
        chunk = None
        if rows is not None:
            chunk = list(itertools.islice(rows, span.rows))
            if len(chunk) < span.rows:
                raise ConvertError(f"{src.path}: ended after {span.start + len(chunk)} rows; "
                                   f"expected {plan.num_rows}")  # fmt: skip
        if span.index in skip:
            continue
        file = shard_name(name, split, span.index, plan.num_shards)
        yield _Job(span.index, span.start, span.stop, file,
                   rejects_part_name(name, split, span.index), chunk)  # fmt: skip


def _execute(task: _Task, jobs: Iterator[_Job], workers: int,
             on_done: Callable[[dict[str, Any]], None], bar: _Bar) -> None:  # fmt: skip
    """Runs the jobs here (one worker) or in a pool of spawned processes."""
    global _TICK
    if workers <= 1:
        _set_task(task)
        _TICK = bar.advance
        try:
            for job in jobs:
                on_done(_run_job(job))
        finally:
            _TICK = lambda n: None  # noqa: E731
        return
    # spawn, not fork: the parent may already run TensorFlow threads.
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with _main_not_reimported(task):
        pool = ctx.Pool(workers, initializer=_init_worker, initargs=(task, queue))
    try:
        pending: dict[int, Any] = {}
        exhausted = False
        while True:
            # At most two jobs per worker in flight bounds the rows held in memory.
            while not exhausted and len(pending) < 2 * workers:
                job = next(jobs, None)
                if job is None:
                    exhausted = True
                else:
                    pending[job.index] = pool.apply_async(_run_job, (job,))
            if not pending:
                break
            _drain(queue, bar)
            ready = [i for i, r in pending.items() if r.ready()]
            for i in sorted(ready):
                on_done(pending.pop(i).get())
            if not ready:
                time.sleep(0.05)
        pool.close()
        pool.join()
        _drain(queue, bar)
    finally:
        pool.terminate()


@contextlib.contextmanager
def _main_not_reimported(task: _Task) -> Iterator[None]:
    """Spawned workers need nothing from the caller's script unless the preprocess
    function lives there; hiding the script's path spares them re-running it (so a
    script without an `if __name__ == "__main__":` guard still works)."""
    main = sys.modules.get("__main__")
    pre_mod = getattr(task.preprocess, "__module__", None)
    hide = (main is not None and getattr(main, "__spec__", None) is None
            and hasattr(main, "__file__") and pre_mod != "__main__")  # fmt: skip
    saved = main.__dict__.pop("__file__") if hide else None
    try:
        yield
    finally:
        if hide:
            main.__file__ = saved


def _drain(queue: Any, bar: _Bar) -> None:
    n = 0
    with contextlib.suppress(Exception):
        while True:
            n += queue.get_nowait()
    bar.advance(n)


def _finalize(out: Path, existing: Manifest | None, src: RowSource, schema: Schema,
              plan: ShardPlan, finished: dict[int, dict[str, Any]], name: str, split: str,
              comp: str, pre_spec: str | None, workload: str | None,
              prog_path: Path) -> Manifest:  # fmt: skip
    """Joins rejects, adds the split to manifest.json, removes leftovers."""
    shards = [finished[i] for i in range(plan.num_shards)]
    rejected = sum(s["rejected"] for s in shards)
    rejects_file = None
    if rejected:
        rejects_file = rejects_name(name, split)
        parts = [out / rejects_part_name(name, split, i) for i, s in enumerate(shards)
                 if s["rejected"]]  # fmt: skip
        tmp = out / temp_name(rejects_file, os.getpid())
        with open(tmp, "w") as f:
            for p in parts:
                f.write(p.read_text())
        os.replace(tmp, out / rejects_file)
    else:
        (out / rejects_name(name, split)).unlink(missing_ok=True)
    info = SplitInfo(
        shards=[ShardInfo(**{k: v for k, v in s.items() if k != "rejected"}) for s in shards],
        records=sum(s["records"] for s in shards),
        rejected=rejected,
        rejects_file=rejects_file,
    )
    if existing is None or (set(existing.splits) <= {split}):
        manifest = Manifest(name=name, schema=schema, compression=comp, splits={split: info},
                            source=src.path, preprocess=pre_spec, workload=workload)  # fmt: skip
    else:
        manifest = existing.model_copy(deep=True)
        if schema != manifest.schema:
            info.schema_ = schema  # this split's records differ from the manifest's schema
        manifest.splits[split] = info
        manifest.workload = manifest.workload or workload
    if src.classes:
        (out / LABELS_FILE).write_text("\n".join(src.classes) + "\n")
    save_manifest(manifest, out)
    prog_path.unlink(missing_ok=True)
    keep = {s["file"] for s in shards} | ({rejects_file} if rejects_file else set())
    _remove_stale(out, name, split, keep)
    return manifest
