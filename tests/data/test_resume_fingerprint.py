"""`convert --resume` refuses what would mix data: a source whose content changed since
the interrupted run (same path and shape), a changed image folder, another --shard-size
or another --name; each refusal names what changed."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from tfperf.data.convert.run import ConvertError, convert

_CALLS = [0]


def fail_late(row):
    """Fails at its FAIL_AT-th row (env) so that a run stops with some shards finished."""
    _CALLS[0] += 1
    if 0 <= int(os.environ.get("FAIL_AT", "-1")) <= _CALLS[0]:
        raise ValueError("stopped on purpose")
    return row


def _interrupted(tmp_path, monkeypatch, source, **kw):
    monkeypatch.setenv("FAIL_AT", "60")
    _CALLS[0] = 0
    with pytest.raises(ConvertError):
        convert(source, tmp_path / "o", workers=1, progress=False, preprocess=fail_late, **kw)
    assert list((tmp_path / "o").glob(".*.progress.json"))
    monkeypatch.setenv("FAIL_AT", "-1")


def _npz(path, seed):
    rng = np.random.default_rng(seed)
    np.savez(path, id=np.arange(100), x=rng.random((100, 4)).astype(np.float32))


def test_resume_refuses_a_changed_source(tmp_path, monkeypatch):
    _npz(tmp_path / "d.npz", 0)
    _interrupted(tmp_path, monkeypatch, tmp_path / "d.npz", shard_bytes=400)
    _npz(tmp_path / "d.npz", 1)  # same path, size and shape; other values
    with pytest.raises(ConvertError) as err:
        convert(
            tmp_path / "d.npz",
            tmp_path / "o",
            workers=1,
            progress=False,
            preprocess=fail_late,
            shard_bytes=400,
            resume=True,
        )
    msg = str(err.value)
    assert "cannot resume: content differ" in msg and "its content changed" in msg, msg
    assert str(tmp_path / "d.npz") in msg


def test_resume_refuses_another_shard_size_and_another_name(tmp_path, monkeypatch):
    _npz(tmp_path / "d.npz", 0)
    _interrupted(tmp_path, monkeypatch, tmp_path / "d.npz", shard_bytes=400)
    with pytest.raises(ConvertError, match="--shard-size was 400 bytes, now 800"):
        convert(
            tmp_path / "d.npz",
            tmp_path / "o",
            workers=1,
            progress=False,
            preprocess=fail_late,
            shard_bytes=800,
            resume=True,
        )
    with pytest.raises(ConvertError, match="is named 'd', not 'other'; resume with --name d"):
        convert(
            tmp_path / "d.npz",
            tmp_path / "o",
            workers=1,
            progress=False,
            preprocess=fail_late,
            shard_bytes=400,
            resume=True,
            name="other",
        )
    m = convert(
        tmp_path / "d.npz",
        tmp_path / "o",
        workers=1,
        progress=False,
        preprocess=fail_late,
        shard_bytes=400,
        resume=True,
    )
    assert m.splits["train"].records == 100


def test_resume_refuses_a_changed_image_folder(tmp_path, monkeypatch):
    root = tmp_path / "imgs"
    for label in ("a", "b"):
        (root / label).mkdir(parents=True)
        for j in range(60):
            Image.new("RGB", (4, 4), (j, 0, 0)).save(root / label / f"{j}.png")
    _interrupted(tmp_path, monkeypatch, root, shard_bytes=2000, image_size=(4, 4))
    Image.new("RGB", (4, 4), (9, 9, 9)).save(root / "a" / "0.png")  # replaced, same name
    with pytest.raises(ConvertError, match="the folder's files changed"):
        convert(
            root,
            tmp_path / "o",
            workers=1,
            progress=False,
            preprocess=fail_late,
            shard_bytes=2000,
            image_size=(4, 4),
            resume=True,
        )
