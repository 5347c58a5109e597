"""cli/common.py: what every command shares. TensorFlow's start-up lines (absl's "before
absl::InitializeLog()", cpu_feature_guard, oneDNN, CUDA factory registrations, xprof's "No
UnifiedProfileProcessor") stay off a command's stderr by default, filtered out of `import
tensorflow` by an import hook that gives fd 2 back after it, and come back with the global
--verbose option (a real process: its fd 2 is the point); a user's mistake is one
paragraph and exit 2, Ctrl-C exit 130; while a command runs, whatever else prints to stdout
goes to stderr, its report staying on stdout, laid out for COLUMNS (or 100) columns when
piped."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tfperf.cli.common import (
    REPORT_WIDTH,
    print_json,
    report_width,
    tensorflow_backend,
    tensorflow_startup_filtered,
    user_errors,
)
from tfperf.errors import UserError

from helpers.clikit import TFPERF, tiny_dataset

NOISE = re.compile(r"absl::InitializeLog|cpu_feature_guard|oneDNN|UnifiedProfileProcessor")


def user_env() -> dict[str, str]:
    """The environment of a user who has not set TF_CPP_MIN_LOG_LEVEL."""
    return {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


@functools.cache
def startup_lines() -> list[str]:
    """What importing TensorFlow prints on this machine with every C++ log shown (one
    process, asked once)."""
    code = "import tensorflow as tf; tf.constant(1) + 1"
    res = subprocess.run(
        [sys.executable, "-c", code], env=user_env(), capture_output=True, text=True, timeout=120
    )
    return [line for line in res.stderr.splitlines() if NOISE.search(line)]


# The `tfperf` script's command (main's app) in a fresh interpreter, then a line written to
# stderr after it (the filtered import must give file descriptor 2 back), the garbage
# collector's state and the Keras backend the command ran on.
QUIET = """
import gc, sys
from tfperf.cli.main import app
app(sys.argv[1:], standalone_mode=False)
print("after the command", file=sys.stderr)
print("gc", gc.isenabled(), gc.get_freeze_count(), file=sys.stderr)
import keras
print("keras backend", keras.backend.backend(), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def quiet(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One `inspect` run through QUIET, shared by the tests below (one TensorFlow start-up):
    log level 0 lets TensorFlow print its start-up lines, so only the filter around `import
    tensorflow` keeps them off (a user's level 2, or tfperf's default, only removes more
    lines); KERAS_BACKEND=jax, which the command must overrule."""
    data = tiny_dataset(tmp_path_factory.mktemp("common") / "tiny")
    env = {**user_env(), "TF_CPP_MIN_LOG_LEVEL": "0", "KERAS_BACKEND": "jax"}
    done = subprocess.run(
        [sys.executable, "-c", QUIET, "inspect", str(data)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done, data


def test_startup_lines_only_with_verbose(quiet):
    # The quiet process is also the import hook's test: one TensorFlow start-up fewer.
    quiet, data = quiet
    assert not NOISE.search(quiet.stderr), quiet.stderr
    assert "after the command" in quiet.stderr
    # TensorFlow was imported without the collector's passes: collection is back on, and
    # what the import made is frozen (a few hundred thousand objects; a bare CLI, ~50,000).
    enabled, frozen = quiet.stderr.split("gc ", 1)[1].split()[:2]
    assert enabled == "True" and int(frozen) > 150_000, quiet.stderr
    loud = subprocess.run(
        [TFPERF, "--verbose", "inspect", str(data)], env=user_env(), capture_output=True, text=True
    )
    assert loud.returncode == 0, loud.stderr
    if not NOISE.search(loud.stderr):
        # Only then is TensorFlow asked alone (a process more): a build that prints none
        # skips, as it would have before any run; otherwise --verbose lost them.
        if not startup_lines():
            pytest.skip("this TensorFlow build prints no start-up lines")
        raise AssertionError(f"--verbose: no start-up line on stderr\n{loud.stderr}")
    assert "x1" in quiet.stdout + quiet.stderr  # the report itself is there either way


def test_filter_keeps_other_lines_written_to_fd_2(capfd):
    # C++ writes straight to file descriptor 2, past Python's sys.stderr.
    with tensorflow_startup_filtered():
        os.write(2, b"WARNING: All log messages before absl::InitializeLog() is called\n")
        os.write(2, b"I0000 00:00:1.0 1 cpu_feature_guard.cc:227] This TensorFlow binary\n")
        os.write(2, b"To enable the following instructions: AVX2 FMA, in other operations\n")
        os.write(2, b"E0000 cuda_dnn.cc:8579] Unable to register cuDNN factory\n")
        os.write(2, b"a real problem\n")
    assert capfd.readouterr().err == "a real problem\n"


def test_verbose_is_a_global_option(cli):
    assert "--verbose" in cli("--help").stdout


def _failing(exc: BaseException):
    @user_errors
    def command() -> None:
        raise exc

    return command


def test_a_users_mistake_is_one_paragraph_and_exit_2(capsys):
    with pytest.raises(typer.Exit) as out:
        _failing(UserError("data.dir: expected a folder, found [3]"))()
    assert out.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: data.dir: expected a folder, found [3]"  # brackets as written
    with pytest.raises(typer.Exit) as out:
        _failing(FileNotFoundError("run.yaml"))()
    assert out.value.exit_code == 2
    with pytest.raises(typer.Exit) as out:
        _failing(KeyboardInterrupt())()
    assert out.value.exit_code == 130 and "interrupted" in capsys.readouterr().err
    with pytest.raises(ValueError):  # a bug is not a user's mistake: its traceback shows
        _failing(ValueError("bug"))()


def test_others_print_to_stderr_while_the_report_goes_to_stdout(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "123")

    @user_errors
    def command() -> None:
        print("Found 3 files")  # the user's code, or Keras
        print_json({"rate": 1.5})
        assert report_width() == 123  # piped: COLUMNS
        monkeypatch.setenv("COLUMNS", "wide")
        assert report_width() == REPORT_WIDTH

    command()
    out = capsys.readouterr()
    assert json.loads(out.out) == {"rate": 1.5}
    assert out.err == "Found 3 files\n"


def test_another_keras_backend_is_said_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    tensorflow_backend()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "'jax'" in lines[0] and "run Keras on TensorFlow" in lines[0]
    # keras.json's backend counts too; a TensorFlow one says nothing
    monkeypatch.delenv("KERAS_BACKEND")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    (tmp_path / "keras.json").write_text('{"backend": "torch"}')
    tensorflow_backend()
    assert "'torch'" in capsys.readouterr().err
    (tmp_path / "keras.json").write_text('{"backend": "tensorflow"}')
    tensorflow_backend()
    assert capsys.readouterr().err == ""


def test_tfperf_runs_keras_on_tensorflow_whatever_keras_backend_says(quiet):
    # A fresh process (the backend is fixed when keras is first imported): the `inspect`
    # command under KERAS_BACKEND=jax, said in one line, ran Keras on TensorFlow.
    err = quiet[0].stderr
    assert "keras backend tensorflow" in err.splitlines(), err
    assert "Keras backend 'jax' asked for" in err, err
