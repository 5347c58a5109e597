"""A --fix trial that fails says why in one line: TensorFlow's own message, not the
"Graph execution error:" header of its runtime errors (doctor/fix/trials.cause)."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.doctor.fix.trials import cause


def test_a_runtime_error_is_named_by_its_message_line(tmp_path):
    # a map that fails inside a compiled step, as a rewrite that breaks a pipeline does
    missing = str(tmp_path / "missing.png")
    it = iter(tf.data.Dataset.from_tensor_slices([missing]).map(tf.io.read_file))
    with pytest.raises(tf.errors.NotFoundError) as info:
        tf.function(lambda: it.get_next())()
    said = cause(info.value)
    assert "missing.png" in said and "No such file" in said, said


def test_the_graph_execution_header_and_traceback_are_skipped():
    # the text of a compiled train step's error, as --fix's trials met it
    text = (
        "Graph execution error:\n\nDetected at node ReadFile defined at (most recent call "
        'last):\n  File "mypipe.py", line 5, in load\n\nInput filename tensor must be '
        "scalar, but had shape: [32]\n\t [[{{node ReadFile}}]]\n\t [[while/IteratorGetNext]]"
    )
    error = tf.errors.InvalidArgumentError(None, None, text)
    assert cause(error) == "Input filename tensor must be scalar, but had shape: [32]"


def test_a_plain_error_keeps_its_line():
    assert cause(ValueError("batch sizes differ: 32 vs 64")) == "batch sizes differ: 32 vs 64"
