"""A `tfperf train` (or `evaluate --watch`) that fails before it starts leaves no folders
behind: what it made for train.out_dir is removed again, while folders that existed before,
and anything in them, stay. Through the command line in this process."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import trainkit


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return trainkit.write_data(tmp_path_factory.mktemp("failed_start") / "data", n=32)


def test_a_failed_start_removes_the_out_dir_it_made(tmp_path, data):
    # The model cannot be imported: found after train.out_dir was taken (its lock, folders).
    rf = trainkit.write_runfile(tmp_path, data, model="nosuch:model", max_steps=2)
    out = tmp_path / "new" / "deeper" / "run"
    res = trainkit.tfperf_here("train", rf, "--set", f"train.out_dir={out}", check=False)
    assert res.returncode == 2 and "model.name" in res.stderr, res.stderr
    assert not (tmp_path / "new").exists()  # was out/, out/checkpoints and out/logs


def test_a_failed_start_keeps_what_existed(tmp_path, data):
    rf = trainkit.write_runfile(tmp_path, data, max_steps=2)
    out = tmp_path / "run"
    (out / "logs").mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    res = trainkit.tfperf_here("train", rf, "--set", "data.label=nolabel", check=False)
    assert res.returncode == 2 and "data.label" in res.stderr, res.stderr
    assert sorted(p.name for p in out.iterdir()) == ["logs", "notes.txt"]  # no checkpoints/


def test_a_watch_that_cannot_start_makes_no_folder(tmp_path, data):
    rf = trainkit.write_runfile(tmp_path, data, model="nosuch:model")
    res = trainkit.tfperf_here("evaluate", rf, "--watch", "--timeout", "1", check=False)
    assert res.returncode == 2 and "model.name" in res.stderr, res.stderr
    assert not (tmp_path / "run").exists()
