"""The shard-writing side of `convert`: what a worker process holds (its task, preprocess
function and progress callback, as module globals set once per process) and writing one
shard (temporary name, fsync, rename); `run_here` runs the jobs in this process. The pool
of spawned worker processes is pool.py's; planning, resume and the manifest stay in the
main process (run.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import hashlib
import json
import os
import signal
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfperf.data.convert.options import ConvertError, load_preprocess
from tfperf.data.schema import RowError, Schema
from tfperf.data.shards import temp_name
from tfperf.data.sources import BadValue, RowSource
from tfperf.data.verify import frame
from tfperf.errors import UserError
from tfperf.util.disk import is_disk_full
from tfperf.util.files import write_text_atomic
from tfperf.util.format import cut

TICK_ROWS = 256  # rows between progress reports from a worker (one queue put each)


@dataclass
class ShardTask:
    """What every shard of one run shares; sent once to each worker process."""

    out_dir: str
    where: str  # the source, for messages
    source: RowSource | None  # None: rows come inside each job (iterables)
    schema: Schema
    preprocess: Any  # a callable, a 'module:function' string, a PreprocessFactory, or None
    compression: str
    on_bad_row: str
    preprocess_name: str | None = None  # how messages name the function

    def locate(self, index: int) -> str:
        """Row `index` as messages name it (a CSV's line, else the row counted from 1)."""
        return self.source.locate(index) if self.source is not None else f"row {index + 1}"

    @property
    def item(self) -> str:
        return self.source.item if self.source is not None else "feature"


@dataclass
class ShardJob:
    """One shard to write: source rows [start, stop) into `file`."""

    index: int
    start: int
    stop: int
    file: str
    rejects_part: str
    rows: list[Any] | None = None  # the rows themselves when the source is not random access


class BadRowError(Exception):
    """A bad row with on_bad_row='error', or a source that ended early (message complete)."""


class PreprocessError(ConvertError):
    """The user's preprocess function raised or returned something other than a dict: one
    paragraph naming the function, the row (from 1), the exception and where it was raised.
    """

    def __init__(
        self,
        index: int,
        name: str | None,
        problem: str,
        location: str | None = None,
        where: str | None = None,
    ):
        self.index, self.name, self.problem = index, name or "the preprocess function", problem
        text = self.located(location or f"row {index + 1}")
        super().__init__(f"{where}: {text}" if where else text)

    def located(self, location: str) -> str:
        return (
            f"{location}: {self.name} {self.problem}; fix the function (it takes one row, a "
            f"dict of features, and returns one), or have it raise tfperf.RowError for rows "
            f"that --on-bad-row skip should set aside"
        )


def _raised(exc: BaseException) -> str:
    """ "raised ValueError: text (at file, line N, in fn)": the exception and its last frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" (at {frames[-1].filename}, line {frames[-1].lineno}, in {frames[-1].name})"
    text = cut(" ".join(str(exc).split()))  # the user's message may quote a whole row
    return f"raised {type(exc).__name__}{': ' + text if text else ''}{at if frames else ''}"


# ---- a worker process's state: set once per process by init_worker (or run_here) -------
_TASK: ShardTask | None = None
_PRE: Callable[[Any], Any] | None = None
_TICK: Callable[[int], None] = lambda n: None  # noqa: E731
_STARTED: Callable[[int], None] = lambda index: None  # noqa: E731


def init_worker(task: ShardTask, queue: Any) -> None:
    global _TICK, _STARTED
    with contextlib.suppress(Exception):
        # Die with the parent: a killed convert must not leave writers behind (Linux).
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _set_task(task)
    _TICK = queue.put
    # Which worker writes which shard: the main process names it if this process dies.
    _STARTED = lambda index: queue.put(("start", index, os.getpid()))  # noqa: E731


def _set_task(task: ShardTask) -> None:
    global _TASK, _PRE
    _TASK = task
    _PRE = load_preprocess(task.preprocess)


# ---- one row, one shard ----------------------------------------------------------------
def check_read(row: Any, index: int) -> None:
    """Raises RowError for a value the reader could not make sense of (before any
    preprocess function sees the row)."""
    if isinstance(row, dict):
        for k, v in row.items():
            if isinstance(v, BadValue):
                raise RowError(index, str(k), v.expected, v.found, v.hint)


def encode_row(schema: Schema, row: Any, index: int) -> bytes:
    """The serialized tf.train.Example of `row`; RowError names what is wrong with it."""
    if not isinstance(row, dict):
        raise RowError(index, RowError.WHOLE_ROW, "a dict of features", type(row).__name__)
    check_read(row, index)
    for k, v in row.items():
        if v is None:
            raise RowError(index, str(k), "a value", "an empty cell / null")
    return schema.encode(row, index)


def apply_preprocess(
    fn: Callable[[Any], Any] | None, row: Any, index: int, name: str | None = None
) -> Any:
    """`fn(row)` checked to be a dict; the user's exceptions become PreprocessError naming
    the function `name` (a RowError passes as it is: the row is bad, not the function)."""
    if fn is None:
        return row
    check_read(row, index)
    try:
        out = fn(row)
    except RowError:
        raise
    except Exception as exc:
        raise PreprocessError(index, name, _raised(exc)) from None
    if not isinstance(out, dict):
        found = type(out).__name__
        raise PreprocessError(index, name, f"returned {found}, expected a dict of features")
    return out


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


def _reject(task: ShardTask, index: int, message: str, row: Any) -> str:
    """One line of the rejects file: the row counted from 1 (and its line in a text file)."""
    entry: dict[str, Any] = {"row": index + 1}
    line = task.source.line_of(index) if task.source is not None else None
    if line is not None:
        entry["line"] = line
    entry.update(error=message, repr=_short_repr(row))
    return json.dumps(entry)


def _write_shard(job: ShardJob) -> dict[str, Any]:
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
        stream: Any = sink
        if task.compression == "GZIP":
            # mtime=0 and no file name: a GZIP shard's bytes depend on its records only.
            stream = gzip.GzipFile(
                fileobj=sink,
                mode="wb",
                mtime=0,
                filename="",
                compresslevel=6,
            )
        for offset, row in enumerate(rows):
            index, seen = job.start + offset, seen + 1
            try:
                pre = apply_preprocess(_PRE, row, index, task.preprocess_name)
                data = encode_row(task.schema, pre, index)
            except PreprocessError as exc:
                raise BadRowError(f"{task.where}: {exc.located(task.locate(index))}") from None
            except RowError as exc:
                message = exc.located(task.locate(index), task.item)
                if task.on_bad_row == "error":
                    raise BadRowError(f"{task.where}: {message}") from None
                rejects.append(_reject(task, index, message, row))
                continue
            finally:
                unticked += 1
                if unticked >= TICK_ROWS:
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
        raise BadRowError(
            f"{task.where}: expected rows {job.start + 1}..{job.stop} (counted from 1), "
            f"the source ended after {seen} of them"
        )
    if rejects:
        # Before the shard: a finished shard has its rejects.
        write_text_atomic(out / job.rejects_part, "\n".join(rejects) + "\n")
    os.replace(tmp, final)
    return {
        "index": job.index,
        "file": job.file,
        "records": records,
        "bytes": sink.bytes,
        "sha256": sink.sha.hexdigest(),
        "first_row": job.start,
        "rejected": len(rejects),
    }


def run_job(job: ShardJob) -> dict[str, Any]:
    """A job's result, or its error as text (exceptions do not always pickle)."""
    _STARTED(job.index)
    try:
        return _write_shard(job)
    except (BadRowError, UserError) as exc:
        where = "" if isinstance(exc, BadRowError) else f"{_TASK.where if _TASK else ''}: "
        return {"index": job.index, "error": f"{where}{exc}", "user": True}
    except OSError as exc:  # the disk, not the code: full, read-only, removed under us
        out = _TASK.out_dir if _TASK else "?"
        if is_disk_full(exc):  # the main process words it: it knows what is left to write
            return {"index": job.index, "disk_full": True, "path": exc.filename or out}
        problem = exc.strerror or str(exc)
        path = f" ({exc.filename})" if exc.filename else ""
        text = f"--out {out}, shard {job.file}: {problem}{path}; free space or fix access"
        return {"index": job.index, "error": text, "user": True}
    except Exception:
        return {"index": job.index, "error": traceback.format_exc(), "user": False}


def run_here(
    task: ShardTask,
    jobs: Iterator[ShardJob],
    on_done: Callable[[dict[str, Any]], None],
    advance: Callable[[int], None],
) -> None:
    """Runs the jobs in this process, one after the other: `on_done` gets each result,
    `advance` the rows read."""
    global _TICK
    _set_task(task)
    _TICK = advance
    try:
        for job in jobs:
            on_done(run_job(job))
    finally:
        _TICK = lambda n: None  # noqa: E731
