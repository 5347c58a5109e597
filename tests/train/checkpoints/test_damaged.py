"""A damaged checkpoint (checkpoints/damaged.py; bytes flipped in its data file, its
.index cut in half): `read_newest` falls back to the newest older one that reads and names
the damaged ones, none readable is one error naming each, `set_aside` moves them into
checkpoints/damaged/ and out of the manager's state (real checkpoints of one variable).
Then on a real run's checkpoints, through the `tfperf` command line (its app, in this
process: the test is about messages and exit codes, not the process): `train` resumes from
the newest intact one and moves the damaged one aside, `evaluate` evaluates the newest
intact one, `evaluate --watch` falls back to it; each names the damaged checkpoint on
stderr. Nothing readable at all is a named error and a non-zero exit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tfperf.train.checkpoints.damaged import (
    DamagedCheckpointError,
    read_newest,
    reason,
    set_aside,
)

from helpers import trainkit


@pytest.fixture(scope="module")  # real training: the tests using it are marked slow
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


def _saved(folder: Path, steps=(1, 2, 3)) -> list[str]:
    """Checkpoints ckpt-STEP of one variable holding STEP, as the trainer's manager saves."""
    import tensorflow as tf

    v = tf.Variable(0.0)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(v=v), str(folder), max_to_keep=5, checkpoint_name="ckpt"
    )
    for step in steps:
        v.assign(step)
        manager.save(checkpoint_number=step)
    return [str(folder / f"ckpt-{step}") for step in steps]


def _read(prefix: str) -> float:
    import tensorflow as tf

    v = tf.Variable(0.0)
    tf.train.Checkpoint(v=v).read(prefix).expect_partial()  # the manager's save_counter too
    return float(v.numpy())


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_read_newest_falls_back_and_set_aside_moves_the_damaged_away(tmp_path, capsys, damage):
    import tensorflow as tf

    ckpts = tmp_path / "checkpoints"
    prefixes = _saved(ckpts)
    DAMAGE[damage](Path(prefixes[2]))
    path, value, damaged = read_newest(prefixes, _read, purpose="resuming", fix="move it")
    assert (path, value) == (prefixes[1], 2.0)
    assert [p for p, _ in damaged] == [prefixes[2]] and damaged[0][1]  # with TF's reason
    err = capsys.readouterr().err.replace("\n", "")
    assert (
        f"warning: checkpoint {prefixes[2]} is damaged ({damaged[0][1]}); resuming skips it" in err
    )
    assert f"resuming from the newest intact checkpoint, {prefixes[1]}, instead" in err

    aside = set_aside(ckpts, [prefixes[2]], prefixes[1])
    assert aside == ckpts / "damaged"
    assert sorted(p.name for p in aside.iterdir()) == [
        "ckpt-3.data-00000-of-00001",
        "ckpt-3.index",
    ]
    assert not list(ckpts.glob("ckpt-3.*"))
    state = tf.train.get_checkpoint_state(str(ckpts))
    assert [Path(p).name for p in state.all_model_checkpoint_paths] == ["ckpt-1", "ckpt-2"]
    assert tf.train.latest_checkpoint(str(ckpts)) == prefixes[1]


def test_none_readable_is_one_error_naming_each(tmp_path):
    prefixes = _saved(tmp_path, steps=(1, 2))
    _flip(Path(prefixes[1]))
    with pytest.raises(DamagedCheckpointError, match=rf"^evaluating: checkpoint {prefixes[1]} "):
        read_newest(prefixes[1:], _read, purpose="evaluating", fix="train again")
    _truncate_index(Path(prefixes[0]))
    with pytest.raises(DamagedCheckpointError) as err:
        read_newest(prefixes, _read, purpose="evaluating", fix="train again")
    text = str(err.value)
    assert text.startswith("evaluating: all 2 checkpoints are damaged (")
    assert f"{prefixes[1]}: " in text and f"{prefixes[0]}: " in text
    assert text.endswith("; train again")


def test_reason_is_the_first_line_without_the_ops_details():
    import tensorflow as tf

    exc = tf.errors.DataLossError(None, None, "Checksum does not match [Op:RestoreV2]\nnode x")
    assert reason(exc) == "Checksum does not match"
    assert reason(ValueError()) == "ValueError"


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


@pytest.mark.slow  # real training and evaluating
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


@pytest.mark.slow  # real training and evaluating
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_evaluate_once_evaluates_the_newest_intact_checkpoint(trained, tmp_path, damage):
    rf, ckpt_dir = _copy(trained, tmp_path, damage)
    proc = trainkit.tfperf_here("evaluate", str(rf), "--set", "data.eval_split=train", "--json")
    assert json.loads(proc.stdout)["step"] == 4
    assert f"checkpoint {ckpt_dir}/ckpt-6 is damaged" in proc.stderr.replace("\n", "")
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # real training and evaluating
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_watch_falls_back_past_a_damaged_final_checkpoint(trained, tmp_path, damage):
    rf, ckpt_dir = _copy(trained, tmp_path, damage)
    args = ("evaluate", str(rf), "--watch", "--poll", "0.1", "--set", "data.eval_split=train")
    proc = trainkit.tfperf_here(*args, "--json", "--timeout", "120")
    assert [r["step"] for r in json.loads(proc.stdout)] == [4]
    err = proc.stderr.replace("\n", "")
    assert f"giving up on {ckpt_dir}/ckpt-6" in err and "falling back" in err


@pytest.mark.slow  # real training and evaluating
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
