"""util/files: atomic text writes (a temporary name, then a rename; nothing half written)."""

from __future__ import annotations

import os

import pytest

from tfperf.util.files import temp_name, write_text_atomic


def test_temp_name_is_hidden_and_tagged_by_writer():
    assert temp_name("manifest.json", 42) == ".manifest.json.tmp-42"
    assert temp_name("a", 1) != temp_name("a", 2)


def test_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "progress.json"
    path.write_text("old")
    assert write_text_atomic(str(path), "new") == path
    assert path.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["progress.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / "marker"
    path.write_text("kept")
    # A directory where the temporary must go: the write fails, as on a full disk.
    (folder / temp_name("marker", os.getpid())).mkdir()
    with pytest.raises(OSError):
        write_text_atomic(path, "lost")
    assert path.read_text() == "kept"
