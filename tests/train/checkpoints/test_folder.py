"""A run's folders and its checkpoints folder read without TensorFlow
(checkpoints/folder.py), on real files in tmp_path: which checkpoints are finished (listed in
the state file, their .index and every data shard on disk), a prefix resolved from a
checkpoint, a checkpoints folder or a run folder, the FINAL marker written, read (a torn one
is absent) and cleared, and train.out_dir held: its folders made, a file in the way named,
what a failed start made taken back."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.train.checkpoints.folder import (
    CheckpointInfo,
    OutDirError,
    checkpoint_step,
    clear_final,
    hold_out_dir,
    is_complete,
    latest_ready,
    read_final,
    ready_checkpoints,
    resolve_prefix,
    run_dirs,
    write_final,
)
from tfperf.util.lock import LOCK_NAME, holder_alive

from helpers import trainkit


def _touch(p: Path, data: bytes = b"x") -> None:
    p.write_bytes(data)


def _checkpoint(folder: Path, step: int, shards: int = 1) -> str:
    """ckpt-STEP's .index and data shards, listed in the state file."""
    folder.mkdir(parents=True, exist_ok=True)
    _touch(folder / f"ckpt-{step}.index")
    for i in range(shards):
        _touch(folder / f"ckpt-{step}.data-{i:05d}-of-{shards:05d}")
    state = folder / "checkpoint"
    listed = state.read_text() if state.exists() else ""
    state.write_text(listed + f'all_model_checkpoint_paths: "ckpt-{step}"\n')
    return str(folder / f"ckpt-{step}")


def test_only_listed_and_complete_checkpoints_are_ready(tmp_path):
    d = tmp_path
    for step in (5, 7):
        _touch(d / f"ckpt-{step}.index")
    _touch(d / "ckpt-5.data-00000-of-00002")
    _touch(d / "ckpt-5.data-00001-of-00002")
    _touch(d / "ckpt-7.data-00000-of-00002")  # one shard of two: still being written
    _touch(d / "ckpt-8.index")  # complete on disk but not listed yet
    _touch(d / "ckpt-8.data-00000-of-00001")
    (d / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-9"\n'
        'all_model_checkpoint_paths: "ckpt-5"\n'
        'all_model_checkpoint_paths: "ckpt-7"\n'
        'all_model_checkpoint_paths: "ckpt-9"\n'  # listed, no files at all
    )
    assert ready_checkpoints(d) == [CheckpointInfo(5, str(d / "ckpt-5"))]
    assert is_complete(d / "ckpt-8") and not is_complete(d / "ckpt-7")
    _touch(d / "ckpt-5.index", b"")  # an empty index is a torn write
    assert ready_checkpoints(d) == []


def test_missing_or_torn_state_and_final(tmp_path):
    assert ready_checkpoints(tmp_path / "nowhere") == []
    assert latest_ready(tmp_path / "nowhere") is None
    (tmp_path / "FINAL").write_text('{"step": 3')  # torn
    assert read_final(tmp_path) is None
    (tmp_path / "FINAL").write_text('{"step": 3, "checkpoint": "rel/ckpt-3"}')
    assert read_final(tmp_path) == CheckpointInfo(3, str(tmp_path / "ckpt-3"))


def test_final_is_written_read_and_cleared(tmp_path):
    ckpts = tmp_path / "checkpoints"
    path = _checkpoint(ckpts, 12)
    write_final(ckpts, 12, path)
    assert read_final(ckpts) == CheckpointInfo(12, path)
    assert [p.name for p in ckpts.iterdir() if p.name.startswith(".")] == []  # no temp left
    write_final(ckpts, 14, None)  # no checkpoint named: ckpt-STEP beside it
    assert read_final(ckpts) == CheckpointInfo(14, str(ckpts / "ckpt-14"))
    clear_final(ckpts)
    assert read_final(ckpts) is None
    clear_final(ckpts)  # already gone: nothing to do


def test_steps_and_the_newest_ready_checkpoint(tmp_path):
    assert checkpoint_step("/run/checkpoints/ckpt-120") == 120
    assert checkpoint_step("/run/checkpoints/model") is None
    ckpts = tmp_path / "run" / "checkpoints"
    for step in (10, 2):  # listed out of order: sorted by step
        _checkpoint(ckpts, step, shards=2)
    assert [c.step for c in ready_checkpoints(ckpts)] == [2, 10]
    assert latest_ready(ckpts) == CheckpointInfo(10, str(ckpts / "ckpt-10"))


def test_resolve_prefix_from_a_prefix_a_checkpoints_folder_or_a_run_folder(tmp_path):
    ckpts = tmp_path / "run" / "checkpoints"
    _checkpoint(ckpts, 4)
    newest = _checkpoint(ckpts, 8)
    assert resolve_prefix(ckpts / "ckpt-4") == str(ckpts / "ckpt-4")
    assert resolve_prefix(ckpts) == newest
    assert resolve_prefix(tmp_path / "run") == newest
    (ckpts / "ckpt-8.data-00000-of-00001").unlink()
    with pytest.raises(UserError, match="incomplete"):
        resolve_prefix(ckpts / "ckpt-8")
    with pytest.raises(UserError, match="found no finished checkpoint there"):
        resolve_prefix(tmp_path / "elsewhere")


@pytest.fixture
def cfg(tmp_path):
    """A run file in tmp_path whose train.out_dir is the relative `out`."""
    rf = trainkit.write_runfile(tmp_path, tmp_path / "data", out_dir="out")
    return load_config(str(rf), [])


def test_run_dirs_are_relative_to_the_run_files_folder(cfg, tmp_path):
    dirs = run_dirs(cfg)
    assert dirs.out_dir == tmp_path / "out"
    assert dirs.checkpoint_dir == tmp_path / "out" / "checkpoints"
    assert (dirs.train_logs, dirs.eval_logs) == (
        tmp_path / "out" / "logs" / "train",
        tmp_path / "out" / "logs" / "eval",
    )


def test_hold_out_dir_makes_the_folders_and_holds_the_lock(cfg, tmp_path):
    dirs = run_dirs(cfg)
    with ExitStack() as stack:
        hold_out_dir(stack, cfg, dirs)
        assert dirs.checkpoint_dir.is_dir() and dirs.log_dir.is_dir()
        assert holder_alive(dirs.out_dir)
    assert not (dirs.out_dir / LOCK_NAME).exists()  # released when the stack closes
    assert dirs.checkpoint_dir.is_dir()  # a run that went well keeps its folders


def test_a_failed_start_takes_back_the_folders_it_made(cfg, tmp_path):
    dirs = run_dirs(cfg)
    with pytest.raises(RuntimeError), ExitStack() as stack:
        hold_out_dir(stack, cfg, dirs)
        raise RuntimeError("the run failed before writing anything")
    assert not dirs.out_dir.exists()


def test_a_file_in_the_way_is_named(cfg, tmp_path):
    (tmp_path / "out").write_text("a file where the run's folder should be")
    with pytest.raises(OutDirError) as err, ExitStack() as stack:
        hold_out_dir(stack, cfg, run_dirs(cfg))
    assert f"making the run's folder {tmp_path / 'out'} failed" in str(err.value)
    assert f"{tmp_path / 'out'} is a file" in str(err.value)
    assert "change train.out_dir in" in str(err.value)
