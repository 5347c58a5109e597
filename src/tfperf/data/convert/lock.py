"""The folders `convert` makes and holds. A split of --out is held for the whole run (a second
convert of the same split is refused, naming the first's PID), manifest.json only while it
is re-read, merged and written (so two converts of different splits both land in it). Both
are util.lock folder locks in hidden folders of --out, removed when released. A failed
convert removes the folders it made, when they are still empty.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from tfperf.data.convert.options import ConvertError
from tfperf.util.lock import FolderInUseError, folder_lock, read_holder

PURPOSE = "tfperf convert"
MANIFEST_LOCK = ".manifest.lock"
MANIFEST_WAIT_S = 60.0  # the manifest is held for milliseconds: a minute means trouble


def split_lock_name(split: str) -> str:
    return f".split-{split}.lock"


def make_out(out: Path) -> list[Path]:
    """Creates `out`; returns the folders that did not exist, deepest first. An `out` that
    is a file, lies under one, or cannot be created is a ConvertError naming the cause."""
    made = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cannot_write(out, exc) from None
    return made


def remove_made(made: list[Path]) -> None:
    """Removes the folders a failed convert made, deepest first, while they are empty."""
    for folder in made:
        try:
            folder.rmdir()  # only an empty folder: never anything someone wrote
        except OSError:
            return


def _cannot_write(out: Path, exc: OSError) -> ConvertError:
    blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocker == out:
        why = "it is a file, not a folder; choose a folder"
    elif blocker is not None:
        why = f"{blocker} is a file, not a folder; choose a path outside it"
    else:
        why = f"{exc.strerror or exc}; choose a folder you can write to"
    return ConvertError(f"--out {out}: cannot write the dataset there: {why}")


def _hold(stack: contextlib.ExitStack, folder: Path, purpose: str) -> None:
    """Takes the lock folder `folder` into `stack` (FolderInUseError when another live
    process holds it)."""
    for _ in range(10):
        try:
            stack.enter_context(folder_lock(folder, purpose, what="--out"))
            return
        except FileNotFoundError:
            continue  # another convert removed the empty lock folder meanwhile: again
        except FolderInUseError:
            raise
        except OSError as exc:
            raise _cannot_write(folder.parent, exc) from None
    raise ConvertError(f"--out {folder.parent}: could not take the lock folder {folder}")


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(folder)


@contextlib.contextmanager
def split_lock(out: Path, split: str) -> Iterator[None]:
    """Holds split `split` of `out` while this process writes it."""
    folder = out / split_lock_name(split)
    with contextlib.ExitStack() as stack:
        stack.callback(_remove_empty, folder)  # runs after the lock is released
        try:
            _hold(stack, folder, f"{PURPOSE} --split {split}")
        except FolderInUseError as exc:
            holder = read_holder(folder)
            if holder is None:
                raise ConvertError(str(exc)) from None
            raise ConvertError(
                f"--out {out}: split '{split}' is in use by {holder.describe()}: another "
                f"convert is writing it; wait for it to end, or write another --split or "
                f"--out (if that process is gone, remove {folder})"
            ) from None
        yield


@contextlib.contextmanager
def manifest_lock(out: Path) -> Iterator[None]:
    """Holds `out`'s manifest.json while it is re-read, merged and written; waits for
    another convert that holds it (for milliseconds, as this one does)."""
    folder = out / MANIFEST_LOCK
    deadline = time.monotonic() + MANIFEST_WAIT_S
    with contextlib.ExitStack() as stack:
        stack.callback(_remove_empty, folder)  # runs after the lock is released
        while True:
            try:
                _hold(stack, folder, PURPOSE)
                break
            except FolderInUseError as exc:
                if time.monotonic() > deadline:
                    raise ConvertError(f"{exc} (waited {MANIFEST_WAIT_S:.0f} s)") from None
                time.sleep(0.02)
        yield
