"""Regression (seed D): tuned vs Python-fed original, the pure-Python TFRecord reader,
generator determinism, the seed's model and loss."""

from __future__ import annotations

import gzip
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import PipelineConfig
from tfperf.data.pipeline import make_dataset
from tfperf.data.verify import index_tfrecord, iter_tfrecord
from tfperf.workloads import get_workload
from tfperf.workloads.regression import RegressionWorkload


def _write(path, schema, rows, compression=None):
    opts = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(str(path), opts) as w:
        for i, row in enumerate(rows):
            w.write(schema.encode(row, i))
    return str(path)


def test_tuned_matches_original(tmp_path):
    wl = get_workload("regression", features=16, hidden=8)
    rows = list(wl.generate(45, seed=1))
    files = [_write(tmp_path / "train-0.tfrecord", wl.schema(), rows)]
    schema = wl.schema()
    tuned = list(
        make_dataset(files, PipelineConfig(batch_size=20), training=False,
                     parse=schema.parse_batch, preprocess=wl.preprocess_batch)
        .as_numpy_iterator()
    )  # fmt: skip
    orig = list(wl.original_dataset(files, 20, training=False).as_numpy_iterator())
    assert [len(y) for _, y in orig] == [20, 20, 5]
    assert len(tuned) == len(orig)
    for (tx, ty), (ox, oy) in zip(tuned, orig, strict=True):
        np.testing.assert_array_equal(tx, ox)
        np.testing.assert_array_equal(ty, oy)
    # The labels are what the seed defines: 1 where the features' sum is positive.
    x = np.concatenate([b[0] for b in tuned])
    y = np.concatenate([b[1] for b in tuned])[:, 0]
    np.testing.assert_array_equal(y, (x.astype(np.float64).sum(axis=1) > 0).astype(np.float32))
    assert 0 < y.sum() < len(y)


def test_original_training_shuffles_files_and_repeats(tmp_path):
    wl = RegressionWorkload(features=4)
    rows = list(wl.generate(24, seed=0))
    files = [_write(tmp_path / f"s{i}.tfrecord", wl.schema(), rows[i * 8 : i * 8 + 8])
             for i in range(3)]  # fmt: skip
    it = wl.original_dataset(files, 8, training=True, seed=5).as_numpy_iterator()
    batches = list(itertools.islice(it, 9))  # three passes over three one-batch files
    assert all(x.shape == (8, 4) for x, _ in batches)
    firsts = [float(x[0, 0]) for x, _ in batches]
    per_file = {float(r["x"][0]) for r in rows[::8]}
    assert set(firsts) == per_file
    assert firsts[0:3] != firsts[3:6] or firsts[3:6] != firsts[6:9]  # file order changes


def test_python_reader_matches_tensorflow(tmp_path):
    wl = RegressionWorkload(features=3)
    rows = list(wl.generate(7, seed=2))
    plain = _write(tmp_path / "a.tfrecord", wl.schema(), rows)
    zipped = _write(tmp_path / "b.tfrecord.gz", wl.schema(), rows, compression="GZIP")
    with open(zipped, "rb") as f:
        assert gzip.decompress(f.read())  # really compressed
    expected = list(tf.data.TFRecordDataset(plain).as_numpy_iterator())
    assert list(iter_tfrecord(plain)) == expected
    assert list(iter_tfrecord(zipped)) == expected
    with open(plain, "rb") as f:
        data = f.read()
    assert [data[o : o + n] for o, n in index_tfrecord(plain)] == expected
    (tmp_path / "cut.tfrecord").write_bytes(data[:-3])
    try:
        list(iter_tfrecord(str(tmp_path / "cut.tfrecord")))
    except ValueError as exc:
        assert "truncated" in str(exc)
    else:
        raise AssertionError("a truncated file must not read silently")


def test_generator_is_deterministic():
    wl = RegressionWorkload(features=32)
    a = np.stack([r["x"] for r in wl.generate(1100, seed=3)])  # crosses a chunk boundary
    b = np.stack([r["x"] for r in wl.generate(1100, seed=3)])
    c = np.stack([r["x"] for r in wl.generate(1100, seed=4)])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.float32 and abs(a.mean()) < 0.05 and abs(a.std() - 1) < 0.05


def test_model_loss_and_optimizer(tmp_path):
    wl = RegressionWorkload(features=16, hidden=32)
    assert (wl.default_optimizer, wl.default_learning_rate) == ("adam", 1e-2)
    # The train loop takes the seed's Adam(1e-2) when the run file names no optimizer.
    from tfperf.config import config_from_dict
    from tfperf.train.model import make_optimizer

    opt = make_optimizer(config_from_dict({"workload": "regression"}), None, 100, wl)
    assert isinstance(opt, keras.optimizers.Adam)
    assert float(opt.learning_rate) == pytest.approx(1e-2)
    files = [_write(tmp_path / "r.tfrecord", wl.schema(), wl.generate(64, seed=0))]
    schema = wl.schema()
    ds = make_dataset(files, PipelineConfig(batch_size=64), training=False,
                      parse=schema.parse_batch, preprocess=wl.preprocess_batch)  # fmt: skip
    [(x, y)] = ds.as_numpy_iterator()
    model = wl.build_model()
    assert tuple(model(x).shape) == (64, 1)
    assert isinstance(wl.loss, keras.losses.BinaryCrossentropy)
    model.compile(optimizer=keras.optimizers.Adam(wl.default_learning_rate), loss=wl.loss,
                  metrics=wl.metrics)  # fmt: skip
    first = model.evaluate(x, y, verbose=0, return_dict=True)
    model.fit(x, y, epochs=15, verbose=0)
    last = model.evaluate(x, y, verbose=0, return_dict=True)
    assert last["loss"] < first["loss"]  # the seed's setup learns the sum's sign
    assert last["accuracy"] > 0.9
