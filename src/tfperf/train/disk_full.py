"""A full disk while writing a checkpoint or the evaluator's results: TensorFlow's
ResourceExhaustedError or an OSError(ENOSPC), turned into one error that names the path,
the free space there and what the last checkpoint took, printed once (exit 2)."""

from __future__ import annotations

import errno
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tfperf.errors import UserError

NO_SPACE = "No space left on device"  # TensorFlow's message for ENOSPC


class DiskFullError(UserError):
    """The disk ran out of space while writing a run's files."""


def is_disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return NO_SPACE in str(exc)  # tf.errors.ResourceExhaustedError (no TF import needed)


def _size(n: float) -> str:
    """Bytes as KiB, MiB or GiB (one decimal)."""
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return ""


def _checkpoint_bytes(checkpoint_dir: Path) -> int | None:
    """Bytes of the newest ckpt-N's files on disk (what the next save needs, about)."""
    try:
        files = [p for p in checkpoint_dir.iterdir() if p.name.startswith("ckpt-") and p.is_file()]
    except OSError:
        return None
    if not files:
        return None
    newest = max(files, key=lambda p: p.stat().st_mtime).name.split(".", 1)[0]
    return sum(p.stat().st_size for p in files if p.name.split(".", 1)[0] == newest)


def disk_full_error(what: str, path: Path, exc: BaseException, fix: str) -> DiskFullError:
    """The one error of a full disk: `what` was being written at `path`."""
    where = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    usage = shutil.disk_usage(where)
    size = _checkpoint_bytes(path) if path.is_dir() else None
    need = f"; the last checkpoint there took {_size(size)}" if size else ""
    return DiskFullError(
        f"{what}: the disk holding {path} is full ({_size(usage.free)} free of "
        f"{_size(usage.total)}{need}): {NO_SPACE}; free space there, or {fix}"
    )


@contextmanager
def disk_full_named(what: str, path: Path, fix: str) -> Iterator[None]:
    """Runs the body; a full disk in it becomes one DiskFullError (other errors pass)."""
    try:
        yield
    except Exception as exc:
        if is_disk_full(exc):
            raise disk_full_error(what, path, exc, fix) from None
        raise
