"""A damaged newest checkpoint (bytes flipped in its data file, its .index cut in half):
`train` resumes from the newest intact one and moves the damaged one aside, `evaluate`
evaluates the newest intact one, `evaluate --watch` falls back to it; each names the
damaged checkpoint on stderr. Nothing readable at all is a named error and a non-zero exit.
All through the `tfperf` command line (its app, in this process: the test is about
messages and exit codes, not the process) on a real run's checkpoints."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import trainkit

pytestmark = pytest.mark.slow  # real training and evaluating


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A finished run: ckpt-2, ckpt-4, ckpt-6 and FINAL naming ckpt-6."""
    root = tmp_path_factory.mktemp("trained")
    data = trainkit.write_data(root / "data", n=64, shards=2)
    rf = trainkit.write_runfile(
        root, data, max_steps=6, steps_per_loop=1, checkpoint={"every_steps": 2, "keep": 5}
    )
    trainkit.tfperf_here("train", str(rf), "--no-progress")
    return root


def _flip(prefix: Path) -> None:
    path = Path(f"{prefix}.data-00000-of-00001")
    data = bytearray(path.read_bytes())
    for i in range(0, len(data), 64):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate_index(prefix: Path) -> None:
    path = Path(f"{prefix}.index")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {"flipped": _flip, "truncated_index": _truncate_index}


def _copy(trained: Path, tmp_path: Path, damage: str, steps=(6,)) -> tuple[Path, Path]:
    """The run copied into tmp_path (its run file rewritten to point there), damaged."""
    for name in ("data", "run", "tinymodels.py"):
        src = trained / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    for rel in ("run.yaml", "run/checkpoints/FINAL"):  # both name absolute paths
        text = (trained / rel).read_text()
        (tmp_path / rel).write_text(text.replace(str(trained), str(tmp_path)))
    rf = tmp_path / "run.yaml"
    ckpt_dir = tmp_path / "run" / "checkpoints"
    for step in steps:
        DAMAGE[damage](ckpt_dir / f"ckpt-{step}")
    return rf, ckpt_dir


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_resume_falls_back_to_the_newest_intact_checkpoint(trained, tmp_path, damage):
    rf, ckpt_dir = _copy(trained, tmp_path, damage)
    proc = trainkit.tfperf_here("train", str(rf), "--no-progress", "--max-steps", "8", "--json")
    err = proc.stderr.replace("\n", "")
    assert f"checkpoint {ckpt_dir}/ckpt-6 is damaged" in err
    assert "shard(s)" not in err and "Traceback" not in err  # the data is not blamed
    assert f"resumed from {ckpt_dir}/ckpt-4 (step 4)" in err
    result = json.loads(proc.stdout)
    assert (result["start_step"], result["steps"]) == (4, 8)
    # Kept, out of the way: the run's new ckpt-6 is its own.
    assert (ckpt_dir / "damaged" / "ckpt-6.index").exists()
    assert json.loads((ckpt_dir / "FINAL").read_text())["step"] == 8


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_evaluate_once_evaluates_the_newest_intact_checkpoint(trained, tmp_path, damage):
    rf, ckpt_dir = _copy(trained, tmp_path, damage)
    proc = trainkit.tfperf_here("evaluate", str(rf), "--set", "data.eval_split=train", "--json")
    assert json.loads(proc.stdout)["step"] == 4
    assert f"checkpoint {ckpt_dir}/ckpt-6 is damaged" in proc.stderr.replace("\n", "")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_watch_falls_back_past_a_damaged_final_checkpoint(trained, tmp_path, damage):
    rf, ckpt_dir = _copy(trained, tmp_path, damage)
    args = ("evaluate", str(rf), "--watch", "--poll", "0.1", "--set", "data.eval_split=train")
    proc = trainkit.tfperf_here(*args, "--json", "--timeout", "120")
    assert [r["step"] for r in json.loads(proc.stdout)] == [4]
    err = proc.stderr.replace("\n", "")
    assert f"giving up on {ckpt_dir}/ckpt-6" in err and "falling back" in err


def test_nothing_readable_is_a_named_error_and_a_failed_exit(trained, tmp_path):
    rf, ckpt_dir = _copy(trained, tmp_path, "flipped", steps=(2, 4, 6))
    base = ("evaluate", str(rf), "--set", "data.eval_split=train")
    watch = trainkit.tfperf_here(*base, "--watch", "--poll", "0.1", "--timeout", "120", check=False)
    assert watch.returncode == 2, watch.stderr
    assert "evaluated nothing" in watch.stderr and "Traceback" not in watch.stderr
    once = trainkit.tfperf_here(*base, check=False)
    assert once.returncode == 2 and "all 3 checkpoints are damaged" in once.stderr
    resume = trainkit.tfperf_here(
        "train", str(rf), "--no-progress", "--max-steps", "8", check=False
    )
    assert resume.returncode == 2, resume.stderr
    err = resume.stderr.replace("\n", "")
    assert "resuming: all 3 checkpoints are damaged" in err and f"move {ckpt_dir} away" in err
    assert not (ckpt_dir / "damaged").exists()  # nothing moved when nothing could be resumed
