"""The compute limit (train/compute_limit.py): the run file's model and train step fed one
cached batch, a few steps on tiny real data: a rate and a CPU cost per example measured over
exactly the steps asked for, under the run file's precision, and the caller's Keras dtype
policy left as it was."""

from __future__ import annotations

import keras
import pytest

from tfperf.config import load_config
from tfperf.train.compute_limit import compute_limit

from helpers import trainkit


@pytest.fixture
def cfg(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=32, shards=1)
    return load_config(str(trainkit.write_runfile(tmp_path, data)), [])


def test_a_few_steps_under_the_run_files_precision_leave_the_callers_policy(cfg):
    keras.config.set_dtype_policy("mixed_bfloat16")  # the caller's, not the run file's
    try:
        limit = compute_limit(cfg, steps=4, steps_per_loop=2)
        assert keras.config.dtype_policy().name == "mixed_bfloat16"  # back as it was
    finally:
        keras.config.set_dtype_policy("float32")
    assert (limit.precision, limit.steps) == ("float32", 4)  # the run file's, the steps asked
    assert limit.examples_per_sec > 0 and limit.cpu_us_per_example > 0
