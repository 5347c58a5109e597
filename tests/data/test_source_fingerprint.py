"""data/source_fingerprint.py: a convert source's content fingerprint (a file hashed whole or
in sampled blocks, a folder's file listing) and what changed between two, in words."""

from __future__ import annotations

import os

from tfperf.data.source_fingerprint import (
    SAMPLES,
    WHOLE_BYTES,
    describe_change,
    source_fingerprint,
)


def test_a_small_file_is_hashed_whole_and_its_changes_named(tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("a,b\n1,2\n")
    before = source_fingerprint(f)
    assert before["size"] == 8 and before["hashed"] == "whole file" and "mtime_ns" not in before
    f.write_text("a,b\n1,3\n")  # same size, other content
    after = source_fingerprint(f)
    assert after["sha256"] != before["sha256"]
    assert describe_change(before, after) == "its content changed (sha256 of whole file)"
    f.write_text("a,b\n1,23\n")
    assert describe_change(after, source_fingerprint(f)) == "its size changed (8 -> 9 bytes)"
    os.utime(f, ns=(1, 1))  # touched only: the whole hash is unchanged
    assert source_fingerprint(f) == source_fingerprint(f)


def test_a_large_file_is_sampled_and_keeps_its_time(tmp_path):
    f = tmp_path / "big.npy"
    f.write_bytes(b"\0" * (WHOLE_BYTES + 1))
    before = source_fingerprint(f)
    assert before["hashed"] == f"{SAMPLES} sampled blocks" and "mtime_ns" in before
    os.utime(f, ns=(1, 1))
    after = source_fingerprint(f)
    assert after["sha256"] == before["sha256"]
    assert describe_change(before, after) == "its modification time changed"


def test_a_folders_listing_changes_with_its_files(tmp_path):
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "0.png").write_bytes(b"png")
    before = source_fingerprint(tmp_path)
    assert (before["files"], before["size"]) == (1, 3)
    (tmp_path / "cat" / "1.png").write_bytes(b"png!")
    after = source_fingerprint(tmp_path)
    assert after["listing_sha256"] != before["listing_sha256"]
    assert describe_change(before, after).startswith("the folder's files changed (1 -> 2 files")


def test_no_source_has_no_fingerprint(tmp_path):
    assert source_fingerprint(tmp_path / "missing") is None
    assert describe_change(None, {"size": 1}) == "the source's content fingerprint is missing"
