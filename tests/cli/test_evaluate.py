"""`tfperf evaluate` (cli/evaluate.py) in this process, where no checkpoint is evaluated: a
run without a finished checkpoint is named with what to do, --checkpoint is refused with
--watch, a --checkpoint folder without checkpoints is named, and --help. Evaluating real
checkpoints: tests/train/test_evaluator.py and tests/train/checkpoints/."""

from __future__ import annotations


def _runfile(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text(f"data:\n  dir: {tmp_path / 'data'}\ntrain:\n  out_dir: {tmp_path / 'out'}\n")
    return run


def test_a_run_without_a_checkpoint_says_to_train_first(tmp_path, cli):
    res = cli("evaluate", _runfile(tmp_path))
    assert res.exit_code == 2 and "Traceback" not in res.output
    err = " ".join(res.stderr.split())
    assert f"{tmp_path / 'out' / 'checkpoints'}: no finished checkpoint yet" in err
    assert f"train.out_dir of {tmp_path / 'run.yaml'}" in err and "`tfperf train` first" in err


def test_a_checkpoint_folder_without_checkpoints_is_named(tmp_path, cli):
    (tmp_path / "empty").mkdir()
    res = cli("evaluate", _runfile(tmp_path), "--checkpoint", tmp_path / "empty", "--all")
    assert res.exit_code == 2
    assert f"{tmp_path / 'empty'}: no finished checkpoint yet" in " ".join(res.stderr.split())


def test_checkpoint_is_not_with_watch(tmp_path, cli):
    res = cli("evaluate", _runfile(tmp_path), "--watch", "--checkpoint", "ckpt-3", "--gpu")
    assert res.exit_code == 2
    assert "--checkpoint: not with --watch (it follows train.out_dir)" in res.stderr


def test_help_names_every_option(cli):
    text = cli("evaluate", "--help").stdout
    for option in ("--watch", "--all", "--checkpoint", "--json", "--poll", "--max-batches"):
        assert option in text, option
    assert "--parent-pid" not in text  # hidden: for the trainer's own evaluator
