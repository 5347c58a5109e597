"""The pool of `convert`'s worker processes, driven from the main process: the task as
spawned workers can receive it (`sendable_task`), the jobs run with a bounded number in
flight (`run_jobs`), progress and start notices drained from the workers' queue, a dead
worker stopped on (worker_watch.py). What a worker does with a job is worker.py's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import pickle
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from tfperf.data.convert.options import PreprocessFactory
from tfperf.data.convert.worker import ShardJob, ShardTask, init_worker, run_here, run_job
from tfperf.data.convert.worker_watch import WorkerWatch

JOBS_PER_WORKER = 2  # jobs in flight per worker: bounds the rows held in memory


def sendable_task(task: ShardTask, preprocess: Any) -> tuple[ShardTask | None, str]:
    """`task` as spawned workers can receive it, or None with the reason they cannot.

    The function object is sent when it pickles; otherwise what workers can load or
    rebuild it from (a 'module:function' name, a PreprocessFactory).
    """
    tries: list[Any]
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


def run_jobs(
    task: ShardTask,
    jobs: Iterator[ShardJob],
    workers: int,
    on_done: Callable[[dict[str, Any]], None],
    advance: Callable[[int], None],
) -> None:
    """Runs the jobs here (one worker) or in a pool of spawned processes; `on_done` gets
    each result in shard order per batch of ready jobs, `advance` the rows read."""
    if workers <= 1:
        run_here(task, jobs, on_done, advance)
        return
    # spawn, not fork: the parent may already run TensorFlow threads.
    ctx = mp.get_context("spawn")
    # A SimpleQueue's put writes to the pipe before it returns (a Queue's feeder thread may
    # not have, when the worker is killed), so a dead worker's start notice is never lost.
    queue = ctx.SimpleQueue()
    with _main_not_reimported(task):
        pool = ctx.Pool(workers, initializer=init_worker, initargs=(task, queue))
    files: dict[int, str] = {}
    watch = WorkerWatch(pool, files)
    try:
        pending: dict[int, Any] = {}
        exhausted = False
        while True:
            while not exhausted and len(pending) < JOBS_PER_WORKER * workers:
                job = next(jobs, None)
                if job is None:
                    exhausted = True
                else:
                    files[job.index] = job.file
                    pending[job.index] = pool.apply_async(run_job, (job,))
            if not pending:
                break
            _drain(queue, advance, watch)
            ready = [i for i, r in pending.items() if r.ready()]
            for i in sorted(ready):
                watch.finished(i)
                on_done(pending.pop(i).get())
            if not ready:
                watch.check(task.out_dir, lambda: _drain(queue, advance, watch))
                time.sleep(0.05)
        pool.close()
        pool.join()
        _drain(queue, advance, watch)
    finally:
        pool.terminate()  # after a death: stops the other workers (their shards are temps)


@contextlib.contextmanager
def _main_not_reimported(task: ShardTask) -> Iterator[None]:
    """Spawned workers need nothing from the caller's script unless the preprocess
    function lives there; hiding the script's path spares them re-running it (so a
    script without an `if __name__ == "__main__":` guard still works)."""
    main = sys.modules.get("__main__")
    pre_mod = getattr(task.preprocess, "__module__", None)
    if (
        main is None
        or getattr(main, "__spec__", None) is not None
        or not hasattr(main, "__file__")
        or pre_mod == "__main__"
    ):
        yield
        return
    saved = main.__dict__.pop("__file__")
    try:
        yield
    finally:
        main.__file__ = saved


def _drain(queue: Any, advance: Callable[[int], None], watch: WorkerWatch) -> None:
    """Rows the workers reported since the last call, passed on to `advance` at once;
    start notices go to `watch`."""
    n = 0
    with contextlib.suppress(OSError, EOFError):  # the pipe closes when the pool is torn down
        while not queue.empty():
            item = queue.get()
            if isinstance(item, tuple):
                watch.started(item[1], item[2])
            else:
                n += item
    advance(n)
