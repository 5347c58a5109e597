"""Folders a command makes, taken back when it fails: a command that stops before it has
written anything leaves no empty folders behind. Only folders that did not exist before
are removed, and only while empty (rmdir, never a recursive delete)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def missing_dirs(*folders: Path) -> list[Path]:
    """Each folder and its parents that do not exist yet, deepest first."""
    found: list[Path] = []
    for folder in folders:
        for p in (folder, *folder.parents):
            if p.exists():
                break
            if p not in found:
                found.append(p)
    # Deepest first: a parent is only empty once its children are gone.
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def remove_empty(folders: list[Path]) -> None:
    """rmdir each folder in order; one that holds anything (or is gone) stays as it is."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            pass


@contextmanager
def removed_on_failure(*folders: Path) -> Iterator[None]:
    """Runs the body; if it raises (Ctrl-C too), the folders among `folders` and their
    parents that did not exist on entry are removed again where empty."""
    made = missing_dirs(*folders)
    try:
        yield
    except BaseException:
        remove_empty(made)
        raise
