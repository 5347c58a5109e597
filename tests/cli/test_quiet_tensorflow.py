"""TensorFlow's start-up lines (absl's "before absl::InitializeLog()", cpu_feature_guard,
oneDNN, CUDA factory registrations, xprof's "No UnifiedProfileProcessor") stay off a
command's stderr by default and come back with the global --verbose option."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import pytest

from helpers.clikit import TFPERF, run_tfperf, tiny_dataset

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


def test_startup_lines_only_with_verbose(tmp_path):
    expected = startup_lines()
    if not expected:
        pytest.skip("this TensorFlow build prints no start-up lines")
    data = tiny_dataset(tmp_path / "tiny")
    quiet = subprocess.run(
        [TFPERF, "inspect", str(data)], env=user_env(), capture_output=True, text=True
    )
    assert quiet.returncode == 0, quiet.stderr
    assert not NOISE.search(quiet.stderr), quiet.stderr
    loud = subprocess.run(
        [TFPERF, "--verbose", "inspect", str(data)], env=user_env(), capture_output=True, text=True
    )
    assert loud.returncode == 0, loud.stderr
    assert NOISE.search(loud.stderr), loud.stderr
    assert "x1" in quiet.stdout + quiet.stderr  # the report itself is there either way


def test_filter_keeps_other_lines_written_to_fd_2():
    # C++ writes straight to file descriptor 2, past Python's sys.stderr.
    code = (
        "import os\n"
        "from tfperf.cli.common import tensorflow_startup_filtered\n"
        "with tensorflow_startup_filtered():\n"
        "    os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called "
        "are written to STDERR\\n')\n"
        "    os.write(2, b'I0000 00:00:1.0 1 cpu_feature_guard.cc:227] This TensorFlow binary "
        "is optimized\\nTo enable the following instructions: AVX2 FMA, in other operations\\n')\n"
        "    os.write(2, b'E0000 cuda_dnn.cc:8579] Unable to register cuDNN factory\\n')\n"
        "    os.write(2, b'a real problem\\n')\n"
        "print('done')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "a real problem\n" and res.stdout == "done\n"


def test_verbose_is_a_global_option():
    res = run_tfperf("--help", env={"COLUMNS": "200"})
    assert "--verbose" in res.stdout


def test_import_hook_filters_the_startup_lines_of_import_tensorflow():
    if not startup_lines():
        pytest.skip("this TensorFlow build prints no start-up lines")
    # Log level 0 lets TensorFlow print them: only the filter around the import is left.
    code = (
        "from tfperf.cli.common import quiet_tensorflow\n"
        "quiet_tensorflow()\n"
        "import tensorflow as tf\n"
        "tf.constant(1) + 1\n"
        "import sys; print('after import', file=sys.stderr)\n"
    )
    env = {**user_env(), "TF_CPP_MIN_LOG_LEVEL": "0"}
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert not NOISE.search(res.stderr), res.stderr
    assert "after import" in res.stderr
