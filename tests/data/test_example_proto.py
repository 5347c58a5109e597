"""tfperf's Example messages (data/example_proto.py) serialise a row to the same bytes as
TensorFlow's own classes, parse back with tf.io.parse_example, and encoding a row does not
import TensorFlow (what a convert worker process needs)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from tfperf.data.schema import Feature, Schema

SCHEMA = Schema(
    features=[
        Feature(name="f", dtype="float32", shape=[3]),
        Feature(name="i", dtype="int64", shape=[2]),
        Feature(name="s", dtype="bytes", shape=[]),
        Feature(name="u", dtype="uint8", shape=[2, 2]),
    ]
)
ROW = {
    "f": np.array([1.5, -2.0, 3.25], np.float32),
    "i": np.array([7, -(2**40)], np.int64),
    "s": b"hello",
    "u": np.array([[1, 2], [3, 255]], np.uint8),
}


def test_the_bytes_are_tensorflows_and_parse_back():
    import tensorflow as tf
    from tensorflow.core.example import example_pb2

    data = SCHEMA.encode(ROW)
    theirs = example_pb2.Example.FromString(data)
    assert theirs.SerializeToString(deterministic=True) == data
    assert list(theirs.features.feature["i"].int64_list.value) == [7, -(2**40)]
    parsed = SCHEMA.parse_batch(tf.constant([data]))
    np.testing.assert_array_equal(parsed["f"][0].numpy(), ROW["f"])
    np.testing.assert_array_equal(parsed["u"][0].numpy(), ROW["u"])


def test_encoding_does_not_import_tensorflow():
    code = (
        "import sys, numpy as np\n"
        "from tfperf.data.schema import Feature, Schema\n"
        "s = Schema(features=[Feature(name='x', dtype='float32', shape=[2])])\n"
        "assert s.encode({'x': np.zeros(2, np.float32)})\n"
        "print('tensorflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
