"""Distance maps (seed A): offline maps on known clicks, the thesis's per-pixel Python maps
equal the vectorized ones, tuned (converted shards) equals the original (py_function over
raw shards), generator determinism, the segmenter."""

from __future__ import annotations

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import PipelineConfig
from tfperf.data.pipeline import make_dataset
from tfperf.workloads import get_workload
from tfperf.workloads.distance_maps import (
    DistanceMapsWorkload,
    distance_maps,
    distance_maps_python,
)


def _write(path, schema, rows):
    with tf.io.TFRecordWriter(str(path)) as w:
        for i, row in enumerate(rows):
            w.write(schema.encode(row, i))
    return str(path)


def _clicks(pos, neg, k=3):
    c = np.full((2, k, 2), -1, np.int64)
    for kind, pts in enumerate((pos, neg)):
        for i, p in enumerate(pts):
            c[kind, i] = p
    return c


@pytest.mark.parametrize("fn", [distance_maps, distance_maps_python])
def test_distance_maps_on_known_clicks(fn):
    d = fn(_clicks([(0, 0), (9, 9)], []), 10)
    assert d.shape == (10, 10, 2) and d.dtype == np.uint8
    assert d[0, 0, 0] == 0 and d[3, 4, 0] == 5  # a 3-4-5 triangle from (0, 0)
    assert d[9, 5, 0] == 4 and d[5, 5, 0] == 6  # nearest of two clicks; sqrt(32) rounds to 6
    assert (d[..., 1] == 255).all()  # no negative click: the clip value everywhere
    far = fn(_clicks([], [(0, 0)]), 40, clip=20)
    assert far[39, 39, 1] == 20 and far[0, 15, 1] == 15 and (far[..., 0] == 20).all()


@pytest.mark.parametrize("clip", [255, 9])
def test_vectorized_equals_python_on_generated_rows(clip):
    wl = DistanceMapsWorkload(image_size=24, max_clicks=4)
    for row in wl.generate(10, seed=2):
        want = distance_maps(row["clicks"], 24, clip)
        # the original gets the clicks as py_function hands them over: nested lists
        got = distance_maps_python(row["clicks"].tolist(), 24, clip)
        np.testing.assert_array_equal(got, want)
        assert got.dtype == np.uint8 and (got <= clip).all()


def test_tuned_matches_original(tmp_path):
    wl = get_workload("distance_maps", image_size=16, max_clicks=3)
    rows = list(wl.generate(11, seed=1))
    convert = wl.offline_preprocess()
    converted = [convert(r) for r in rows]
    raw_files = [_write(tmp_path / "train_raw.tfrecord", wl.raw_schema(), rows)]
    files = [_write(tmp_path / "train.tfrecord", wl.schema(), converted)]
    schema = wl.schema()
    assert schema.names == ["image", "dist", "mask"]
    tuned = list(
        make_dataset(files, PipelineConfig(batch_size=4), training=False,
                     parse=schema.parse_batch, preprocess=wl.preprocess_batch)
        .as_numpy_iterator()
    )  # fmt: skip
    assert wl.original_needs_raw
    orig = list(wl.original_dataset(raw_files, 4, training=False).as_numpy_iterator())
    assert [len(x) for x, _ in tuned] == [len(x) for x, _ in orig] == [4, 4, 3]
    for (tx, ty), (ox, oy) in zip(tuned, orig, strict=True):
        assert tx.shape[1:] == (16, 16, 3) and ty.shape[1:] == (16, 16, 1)
        np.testing.assert_allclose(tx, ox, atol=1e-6)
        np.testing.assert_array_equal(ty, oy)
    # The channels are image, positive map, negative map, all scaled to [0, 1].
    first = tuned[0][0][0]
    np.testing.assert_allclose(first[..., 0] * 255, rows[0]["image"], atol=1e-3)
    np.testing.assert_allclose(first[..., 1:] * 255, converted[0]["dist"], atol=1e-3)


def test_original_training_repeats_full_batches(tmp_path):
    wl = DistanceMapsWorkload(image_size=8, max_clicks=2)
    raw = [_write(tmp_path / "r.tfrecord", wl.raw_schema(), wl.generate(5, seed=0))]
    stream = wl.original_dataset(raw, 2, training=True, seed=0).as_numpy_iterator()
    assert [len(x) for x, _ in itertools.islice(stream, 6)] == [2] * 6


def test_generator_is_deterministic_and_clicks_are_consistent():
    wl = DistanceMapsWorkload(image_size=24, max_clicks=5)
    a = list(wl.generate(8, seed=3))
    b = list(wl.generate(8, seed=3))
    c = list(wl.generate(8, seed=4))
    for ra, rb in zip(a, b, strict=True):
        for key in ra:
            np.testing.assert_array_equal(ra[key], rb[key])
    assert any(not np.array_equal(ra["image"], rc["image"]) for ra, rc in zip(a, c, strict=True))
    for row in a:
        wl.raw_schema().validate_row(row)
        mask, clicks = row["mask"], row["clicks"]
        assert mask.any()
        pos = clicks[0][clicks[0, :, 0] >= 0]
        neg = clicks[1][clicks[1, :, 0] >= 0]
        assert 1 <= len(pos) <= 5 and len(neg) <= 5
        assert (mask[pos[:, 0], pos[:, 1]] == 1).all()  # positive clicks on the object
        assert (mask[neg[:, 0], neg[:, 1]] == 0).all()  # negative clicks off it


def test_model_forward_pass_and_loss():
    wl = DistanceMapsWorkload(image_size=16, filters=4)
    x = np.random.default_rng(0).random((3, 16, 16, 3), dtype=np.float32)
    logits = wl.build_model()(x)
    assert tuple(logits.shape) == (3, 16, 16, 1) and logits.dtype == "float32"
    assert isinstance(wl.loss, keras.losses.BinaryCrossentropy)
    y = (x[..., :1] > 0.5).astype(np.float32)
    assert np.isfinite(float(wl.loss(y, logits)))
    with pytest.raises(ValueError, match="image_size"):
        DistanceMapsWorkload(image_size=15)
