"""A content fingerprint of a convert source (a file, or a folder's sorted file list), kept
in the progress file so that `convert --resume` refuses a source that changed since the
interrupted run instead of mixing old and new records."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

WHOLE_BYTES = 8 * 2**20  # files up to this size are hashed whole
SAMPLES, SAMPLE_BYTES = 16, 64 * 2**10  # larger ones: 16 blocks of 64 KiB, first to last


def source_fingerprint(path: str | Path) -> dict[str, Any] | None:
    """Size, time and a hash of a file (or of a folder's file list); None for no path."""
    p = Path(path)
    if p.is_file():
        return _file(p)
    if p.is_dir():
        return _folder(p)
    return None


def _file(p: Path) -> dict[str, Any]:
    st = p.stat()
    h = hashlib.sha256()
    whole = st.st_size <= WHOLE_BYTES
    with open(p, "rb") as f:
        if whole:
            for block in iter(lambda: f.read(2**20), b""):
                h.update(block)
        else:
            for i in range(SAMPLES):
                f.seek(i * (st.st_size - SAMPLE_BYTES) // (SAMPLES - 1))
                h.update(f.read(SAMPLE_BYTES))
    out: dict[str, Any] = {"size": st.st_size, "sha256": h.hexdigest()}
    if not whole:  # a sampled hash can miss a change between samples; the time cannot
        out["mtime_ns"] = st.st_mtime_ns
    out["hashed"] = "whole file" if whole else f"{SAMPLES} sampled blocks"
    return out


def _folder(p: Path) -> dict[str, Any]:
    # Every file's relative path, size and time, sorted: adding, removing, replacing or
    # touching a file changes it; the images themselves are not read.
    h, files, size = hashlib.sha256(), 0, 0
    for f in sorted(x for x in p.rglob("*") if x.is_file()):
        st = f.stat()
        h.update(f"{f.relative_to(p).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        files, size = files + 1, size + st.st_size
    return {"files": files, "size": size, "listing_sha256": h.hexdigest()}


def describe_change(old: dict[str, Any] | None, new: dict[str, Any] | None) -> str:
    """What differs between two fingerprints, in words."""
    if not old or not new:
        return "the source's content fingerprint is missing"
    if "files" in new or "files" in old:
        return (
            f"the folder's files changed ({old.get('files')} -> {new.get('files')} files, "
            f"{old.get('size')} -> {new.get('size')} bytes, or a file was replaced or touched)"
        )
    if old.get("size") != new.get("size"):
        return f"its size changed ({old.get('size')} -> {new.get('size')} bytes)"
    if old.get("sha256") != new.get("sha256"):
        return f"its content changed (sha256 of {new.get('hashed', 'the file')})"
    return "its modification time changed"
