"""Temporaries that a process killed mid-write leaves behind in a run's folders, removed
at start, and only ours: TensorFlow's sharded-save folders (ckpt-N_temp) and state-file
temporaries in checkpoints/, only while no live process holds train.out_dir (or by the
holder itself), and the evaluator's .best.tmp-PID / .best.old-PID and our .NAME.tmp-PID
files, only when that PID is gone.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import psutil

from tfperf.util.lock import holder_alive

CKPT_TEMP = re.compile(r"^ckpt-\d+_temp$")  # TF's CheckpointManager: {prefix}_temp/part-*
STATE_TEMP = re.compile(r"^checkpoint\.tmp[0-9a-f]{32}$")  # TF's atomic write of its state
PID_TEMP = re.compile(r"^\.[\w.-]+\.(?:tmp|old)-(\d+)$")  # ours: util.files.temp_name, best/


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def remove_checkpoint_temps(checkpoint_dir: Path) -> list[Path]:
    """Removes TF's save temporaries in checkpoints/; the caller holds train.out_dir (the
    only writer there) or has checked that nobody does."""
    gone = [
        p for p in _entries(checkpoint_dir) if CKPT_TEMP.match(p.name) or STATE_TEMP.match(p.name)
    ]
    for p in gone:
        _remove(p)
    return gone


def remove_dead_pid_temps(folder: Path) -> list[Path]:
    """Removes our .NAME.tmp-PID / .NAME.old-PID entries of `folder` whose process is gone."""
    gone = []
    for p in _entries(folder):
        m = PID_TEMP.match(p.name)
        if m and int(m.group(1)) != os.getpid() and not psutil.pid_exists(int(m.group(1))):
            _remove(p)
            gone.append(p)
    return gone


def remove_stale(out_dir: Path, checkpoint_dir: Path, *, holding: bool) -> list[Path]:
    """At a start: the dead writers' temporaries of out_dir, and of checkpoints/ only when
    `holding` train.out_dir's lock or when no live process holds it."""
    gone = remove_dead_pid_temps(out_dir)
    if holding or not holder_alive(out_dir):  # checkpoints/ is the holder's to clean
        gone += remove_dead_pid_temps(checkpoint_dir) + remove_checkpoint_temps(checkpoint_dir)
    return gone
