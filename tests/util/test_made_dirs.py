"""util/made_dirs: the folders a failed command made are taken back (only new, only empty)."""

from __future__ import annotations

import pytest

from tfperf.util.made_dirs import missing_dirs, remove_empty, removed_on_failure


def test_missing_dirs_are_the_new_folders_deepest_first(tmp_path):
    a, b = tmp_path / "x" / "a", tmp_path / "x" / "b" / "c"
    made = missing_dirs(a, b)
    assert sorted(made) == sorted([a, b, b.parent, tmp_path / "x"])  # x once
    assert made[0] == b and made[-1] == tmp_path / "x"  # children before their parents
    assert missing_dirs(tmp_path) == []


def test_remove_empty_keeps_a_folder_with_files(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    (tmp_path / "empty").mkdir()
    remove_empty([tmp_path / "full", tmp_path / "empty", tmp_path / "gone"])
    assert [p.name for p in tmp_path.iterdir()] == ["full"]


def test_a_failure_takes_back_only_the_new_empty_folders(tmp_path):
    (tmp_path / "old").mkdir()
    out, logs = tmp_path / "new" / "out", tmp_path / "old" / "logs"
    with pytest.raises(KeyboardInterrupt), removed_on_failure(out, logs):
        out.mkdir(parents=True)
        logs.mkdir()
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]
    assert list((tmp_path / "old").iterdir()) == []


def test_folders_that_got_files_or_a_success_stay(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError), removed_on_failure(out):
        out.mkdir()
        (out / "summary.json").write_text("{}")
        raise ValueError
    assert (out / "summary.json").exists()
    done = tmp_path / "done"
    with removed_on_failure(done):
        done.mkdir()
    assert done.is_dir()
