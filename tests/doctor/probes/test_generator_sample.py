"""The from_generator finding names a runnable change: the tfperf.convert call that writes the
generator's data to shards once (run here on the sample: it writes shards), with the gain
measured on a sample of 2,000 elements read back through tfperf's pipeline."""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf

import tfperf
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.generator_sample import (
    LEAST,
    SAMPLE,
    sample_generator,
    sample_size,
    with_generator_sample,
)

X = np.random.default_rng(0).random((3_000, 32), dtype=np.float32)
Y = np.arange(3_000, dtype=np.float32).reshape(-1, 1)


def examples():
    for i in range(len(X)):
        yield X[i], Y[i]


def _generator_pipeline():
    signature = (tf.TensorSpec([32], tf.float32), tf.TensorSpec([1], tf.float32))
    ds = tf.data.Dataset.from_generator(examples, output_signature=signature)
    return ds.batch(64).prefetch(tf.data.AUTOTUNE)


def _finding():
    return Finding(
        "from_generator", "generator", "flat_map#1", "rule", "rule change", "", 2.0, "input", 1
    )


def test_generator_finding_gives_a_runnable_convert_call_and_a_measured_gain(tmp_path):
    graph = lint.read_graph(_generator_pipeline())
    sample = sample_generator(graph, tmp_path / "sample")
    assert sample is not None and sample.elements == SAMPLE
    manifest = json.loads((tmp_path / "sample" / "manifest.json").read_text())
    assert "generated" in json.dumps(manifest)
    # Reading shards skips the Python round trip per element: faster, measured.
    assert sample.shards > sample.generator > 0
    [f] = with_generator_sample([_finding()], graph)
    assert "tfperf.convert(" in f.change and "YOUR_GENERATOR()" in f.change
    assert f"sample of {SAMPLE:,} elements" in f.evidence and "x)" in f.evidence
    # The call the finding names, run on this test's generator, writes shards.
    out = tmp_path / "mine"
    call = sample.api_call(str(out)).replace("YOUR_GENERATOR", "examples")
    eval(call, {"tfperf": tfperf, "examples": examples})  # noqa: S307 - the finding's own text
    shards = list(out.glob("generated-train.tfrecord-*"))
    assert shards, list(out.iterdir())
    read = tfperf.make_input_dataset(
        tfperf.config_from_dict({"data": {"dir": str(out), "label": "y"}}),
        training=False,
        split="train",
    )
    labels = np.concatenate([y.numpy().ravel() for _, y in read])
    assert sorted(labels.tolist()) == Y.ravel().tolist()


def test_a_doctor_of_short_measurements_samples_less():
    assert sample_size(30, 64) == SAMPLE  # the default doctor
    assert sample_size(4, 32) == LEAST < SAMPLE  # e.g. budget_s of a few seconds
    assert sample_size(10, 64) == 1280 and sample_size(1000, 512) == SAMPLE


def test_pipelines_without_a_generator_are_left_alone(tmp_path):
    ds = tf.data.Dataset.from_tensor_slices((X, Y)).batch(64)
    assert sample_generator(lint.read_graph(ds), tmp_path) is None
    other = Finding("no_prefetch", "t", None, "e", "c", "", 1.0, "input")
    assert with_generator_sample([other], lint.read_graph(ds))[0].change == "c"


def _slow_pipeline(pause: float):
    import time

    def slow():
        for i in range(100_000):
            time.sleep(pause)
            yield X[i % len(X)], Y[i % len(Y)]

    signature = (tf.TensorSpec([32], tf.float32), tf.TensorSpec([1], tf.float32))
    return tf.data.Dataset.from_generator(slow, output_signature=signature).batch(64)


def test_a_slow_generator_is_sampled_within_its_seconds_or_said_not_measured(tmp_path):
    """Issue 30: a generator of a few elements a second took minutes for its least sample
    (LEAST elements, then timed again); within `seconds` it reads for half of them, and
    says so when fewer than a batch came."""
    import time

    start = time.monotonic()
    [f] = with_generator_sample([_finding()], lint.read_graph(_slow_pipeline(0.2)), seconds=4)
    assert time.monotonic() - start < 60  # the read alone is cut at 2 s
    assert "not measured: the generator yielded" in f.evidence and f.change == "rule change"
    # About 100 elements/s: the read is cut at 2 s with a few batches, timed by that read.
    sample = sample_generator(lint.read_graph(_slow_pipeline(0.01)), tmp_path / "s", seconds=4)
    assert sample is not None and 64 <= sample.elements < SAMPLE
    assert 0 < sample.generator < 200 < sample.shards
