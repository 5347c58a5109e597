"""One process at a time in a folder: `folder_lock(dir, purpose)` holds `dir/.tfperf.lock`
(the holder's PID, host, start time and purpose, as JSON) while a command writes there, and
refuses with a message naming the holder when a live process already holds it. A lock left
by a dead process on this host (kill -9, a crash) is stale and taken over; a lock from
another host is never taken over, since its process cannot be checked from here.

The lock file is created with O_EXCL, so two processes racing for a free folder cannot both
win; it is removed when the holder exits the `with` block.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from tfperf.errors import UserError

LOCK_NAME = ".tfperf.lock"


class FolderInUseError(UserError):
    """Another live process holds the folder's lock."""


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    since: float  # time.time() when the lock was taken
    purpose: str  # e.g. "tfperf train"
    create_time: float | None = None  # the process's start time: tells a reused PID apart

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"PID {self.pid} on {self.host} ({self.purpose}) since {when}"

    def alive(self) -> bool:
        """True unless this host's process table shows the holder is gone (or its PID was
        reused by a process started later)."""
        if self.host != socket.gethostname():
            return True  # cannot be checked from here: assume alive
        try:
            proc = psutil.Process(self.pid)
            if self.create_time is not None and abs(proc.create_time() - self.create_time) > 1:
                return False
            return proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True


def read_holder(folder: str | Path) -> LockHolder | None:
    """Who holds `folder`'s lock (None when unlocked or the file is unreadable)."""
    try:
        data = json.loads((Path(folder) / LOCK_NAME).read_text())
        return LockHolder(**data)
    except (OSError, ValueError, TypeError):
        return None


def holder_alive(folder: str | Path) -> bool:
    """True when a live process holds `folder` (used before cleaning its temporaries)."""
    holder = read_holder(folder)
    return holder is not None and holder.alive()


def _me(purpose: str) -> LockHolder:
    create = psutil.Process(os.getpid()).create_time()
    return LockHolder(os.getpid(), socket.gethostname(), time.time(), purpose, create)


@contextmanager
def folder_lock(folder: str | Path, purpose: str, *, what: str = "folder") -> Iterator[Path]:
    """Holds `folder` for this process (created if missing). `what` names the folder in the
    error, e.g. "train.out_dir" or "--out". Re-entrant within one process."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    me = _me(purpose)
    for _ in range(3):  # a stale lock is removed, then the create is tried again
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = read_holder(folder)
            if holder is not None and holder.pid == me.pid and holder.host == me.host:
                yield folder  # this process already holds it (nested use)
                return
            if holder is None or not holder.alive():
                path.unlink(missing_ok=True)  # stale: its process is gone
                continue
            raise FolderInUseError(
                f"{what} {folder} is in use by {holder.describe()}; wait for it to end, or "
                f"use another folder (if that process is gone, remove {path})"
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(asdict(me), f)
        break
    else:
        raise FolderInUseError(f"{what} {folder}: could not take {path} (another process?)")
    try:
        yield folder
    finally:
        held = read_holder(folder)
        if held is not None and held.pid == me.pid and held.host == me.host:
            path.unlink(missing_ok=True)
