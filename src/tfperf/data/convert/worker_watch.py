"""Dead writer processes of `convert`'s pool: multiprocessing's Pool quietly replaces a
worker killed mid-shard (kill -9, the OOM killer) and waits forever for its result, so
the main process watches which worker writes which shard and stops when one dies."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

from tfperf.data.convert.options import ConvertError


class WorkerWatch:
    """Which worker process (pid) writes which shard, fed by the workers' start notices."""

    def __init__(self, pool: Any, files: dict[int, str]):
        self.pool, self.files = pool, files  # files: job index -> shard file name
        self.procs: dict[int, Any] = {}
        self.running: dict[int, int] = {}  # pid -> index of the job it started last
        self.done: set[int] = set()
        self._refresh()

    def started(self, index: int, pid: int) -> None:
        if index not in self.done:  # a notice can arrive after its result
            self.running[pid] = index

    def finished(self, index: int) -> None:
        self.done.add(index)
        self.running = {p: i for p, i in self.running.items() if i != index}

    def check(self, out_dir: str, last_notices: Callable[[], None]) -> None:
        """Raises a ConvertError naming the shard and the cause when a worker of the pool
        has exited (they only exit when the pool is closed, after every result is in).
        `last_notices` takes the start notices still in the pipe before the shard is named."""
        self._refresh()
        for pid, proc in self.procs.items():
            if proc.exitcode is not None:
                last_notices()
                raise ConvertError(
                    f"--out {out_dir}: {self._text(pid, proc.exitcode)}; the other workers "
                    "were stopped. Shards finished so far are kept: run the same command "
                    "with --resume to continue (with fewer --workers or smaller shards if "
                    "memory ran out)"
                )

    def _refresh(self) -> None:
        # The pool's process objects, kept here: the pool drops a dead one (and starts
        # another) on its own, and its exit code would go with it. A private attribute of
        # multiprocessing.pool.Pool, stable since Python 3.0.
        for p in getattr(self.pool, "_pool", []):
            self.procs.setdefault(p.pid, p)

    def _text(self, pid: int, code: int) -> str:
        index = self.running.get(pid)
        shard = (
            f"shard {self.files.get(index, index)}"
            if index is not None
            else "a shard it had just taken (no start notice yet)"
        )
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else -code
            why = f"was killed by signal {name}"
            if -code == signal.SIGKILL:
                why += " (kill -9, or the kernel's out-of-memory killer: see `dmesg`)"
        else:
            why = f"exited with code {code}"
        return f"worker process {pid} {why} while writing {shard}"
