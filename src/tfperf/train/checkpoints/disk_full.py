"""A full disk while writing a checkpoint or the evaluator's results: TensorFlow's
ResourceExhaustedError or an OSError(ENOSPC), turned into one error that names the path,
the free space there and what the last checkpoint took, printed once (exit 2)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tfperf.util.disk import NO_SPACE, DiskFullError, free_text, is_disk_full, size_text

__all__ = [
    "DiskFullError",
    "disk_full_error",
    "disk_full_named",
    "is_disk_full",
    "newest_checkpoint_bytes",
]


def newest_checkpoint_bytes(checkpoint_dir: Path) -> int | None:
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
    size = newest_checkpoint_bytes(path) if path.is_dir() else None
    need = f"; the last checkpoint there took {size_text(size)}" if size else ""
    return DiskFullError(
        f"{what}: the disk holding {path} is full ({free_text(path)}{need}): {NO_SPACE}; "
        f"free space there, or {fix}"
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
