"""What a run needs before its first step (train/setup.py): where training ends (max_steps
over epochs, one epoch when nothing is set), an epoch's steps, the batch each replica gets,
which of the run's checkpoints a resume may start from; and `prepare` on tiny real data: the
session's target, hooks in order and train.out_dir held, then a second session resuming
from the first one's checkpoint (FINAL cleared: the resumed run is not over)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tfperf.config import load_config
from tfperf.errors import UserError
from tfperf.hooks import Hook
from tfperf.observe.summaries import SummaryHook
from tfperf.train.checkpoints.folder import write_final
from tfperf.train.checkpoints.save import CheckpointHook
from tfperf.train.run_hooks import NanCheck
from tfperf.train.setup import (
    per_replica_batch,
    plan_target_step,
    prepare,
    resume_candidates,
    steps_per_epoch,
)
from tfperf.util.lock import holder_alive

from helpers import trainkit


def test_plan_target_step():
    assert plan_target_step(30, 2, 10) == (30, "max_steps")  # max_steps wins
    assert plan_target_step(None, 2, 10) == (20, "epochs")
    assert plan_target_step(None, None, 10) == (None, "max_time")
    with pytest.raises(UserError, match="train.epochs: the epoch length is unknown"):
        plan_target_step(None, 2, None)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return trainkit.write_data(tmp_path_factory.mktemp("setup") / "data", n=68, shards=2)


@pytest.fixture
def runfile(tmp_path, data):
    return str(trainkit.write_runfile(tmp_path, data, steps_per_loop=2, log_every=50))


def test_steps_per_epoch_from_the_split_or_the_run_file(runfile):
    cfg = load_config(runfile, [])
    assert steps_per_epoch(cfg, 8) == 8  # 68 records: 8 full batches, the rest dropped
    assert steps_per_epoch(cfg, 32) == 2
    assert steps_per_epoch(load_config(runfile, ["train.steps_per_epoch=5"]), 8) == 5
    assert steps_per_epoch(load_config(runfile, ["data.pipeline=mod:fn"]), 8) is None


def test_per_replica_batch_from_the_spec_the_real_batch_or_the_run_file(runfile):
    import tensorflow as tf

    cfg = load_config(runfile, [])
    piped = load_config(runfile, ["data.pipeline=mod:fn"])
    fixed = (tf.TensorSpec([16, 4]), tf.TensorSpec([16]))
    unknown = (tf.TensorSpec([None, 4]), tf.TensorSpec([None]))
    six = (tf.zeros([6, 4]), tf.zeros([6]))
    assert per_replica_batch(piped, fixed, lambda: six) == 16  # static: the spec says
    assert per_replica_batch(piped, unknown, lambda: six) == 6  # a user's own batch
    assert per_replica_batch(cfg, unknown, lambda: six) == 8  # pipeline.batch_size


def test_resume_candidates_are_listed_checkpoints_with_an_index(tmp_path):
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for step in (12, 4):
        (ckpts / f"ckpt-{step}.index").write_bytes(b"x")
    (ckpts / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-12"\n'
        'all_model_checkpoint_paths: "ckpt-12"\n'
        'all_model_checkpoint_paths: "ckpt-4"\n'
        'all_model_checkpoint_paths: "ckpt-8"\n'  # listed, its files gone
    )
    assert resume_candidates(ckpts) == [str(ckpts / "ckpt-4"), str(ckpts / "ckpt-12")]
    assert resume_candidates(tmp_path / "nowhere") == []


class Mine(Hook):
    """A caller's hook: last in the list."""


def test_prepare_builds_a_session_and_a_second_one_resumes(runfile, capsys):
    cfg = load_config(runfile, [])
    with ExitStack() as held:
        session = prepare(cfg, hooks=[Mine()], progress=False, held=held)
        # Nothing set: one epoch of 68 // 8 full batches.
        assert (session.target, session.target_reason) == (8, "epochs")
        assert session.global_batch == 8 and session.restore_path is None
        kinds = [type(h) for h in session.hooks.hooks]
        assert kinds == [NanCheck, CheckpointHook, SummaryHook, Mine]
        assert holder_alive(session.dirs.out_dir)  # train.out_dir held while `held` is open
        checkpoint_hook = session.hooks.hooks[1]
        session.run.step = 3  # as if 3 steps were trained
        session.parts.step_var.assign(3)
        saved = checkpoint_hook.save(session.run)
    assert not holder_alive(session.dirs.out_dir)
    write_final(session.dirs.checkpoint_dir, 3, saved)

    with ExitStack() as held:
        again = prepare(cfg, max_steps=5, progress=False, held=held)
    assert again.restore_path == saved and again.run.step == 3
    assert (again.target, again.target_reason) == (5, "max_steps")
    assert f"resumed from {saved} (step 3)" in capsys.readouterr().err
    assert not (again.dirs.checkpoint_dir / "FINAL").exists()


def test_a_changed_pipeline_resumes_the_model_and_restarts_its_input(runfile, capsys):
    """The run file's pipeline changed (as --fix changes it) in the same train.out_dir: the
    checkpoint is not damaged; auto restores model, optimizer and step and says the input
    starts over in one line, require is one error, skip never restores the input."""
    cfg = load_config(runfile, [])
    with ExitStack() as held:
        session = prepare(cfg, progress=False, held=held)
        session.run.step = 3
        session.parts.step_var.assign(3)
        saved = session.hooks.hooks[1].save(session.run)
    capsys.readouterr()
    changed = ["pipeline.parse=per_example"]  # another iterator graph
    with ExitStack() as held:
        again = prepare(load_config(runfile, changed), progress=False, held=held)
    err = capsys.readouterr().err
    assert again.restore_path == saved and again.run.step == 3
    assert "damaged" not in err and "unrestored values" not in err  # one line, no noise
    lines = [ln for ln in err.splitlines() if "another pipeline" in ln]
    assert len(lines) == 1 and "starts from its beginning" in lines[0], err
    with ExitStack() as held, pytest.raises(UserError, match="train.restore_input: require"):
        prepare(load_config(runfile, [*changed, "train.restore_input=require"]), held=held)
    with ExitStack() as held:
        skipped = prepare(
            load_config(runfile, [*changed, "train.restore_input=skip"]), progress=False, held=held
        )
    assert skipped.run.step == 3 and "another pipeline" not in capsys.readouterr().err
