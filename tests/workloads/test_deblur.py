"""Deblur (seed B): the raw pairs are PNG files' bytes and `convert` decodes them once;
both images of a pair get the same patch (tuned and original), tuned equals original on
centre crops, the tuned crop is checkpointable, determinism, `tfperf convert`, model."""

from __future__ import annotations

import itertools
import pickle

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import PipelineConfig
from tfperf.data.manifest import load_manifest
from tfperf.data.pipeline import make_dataset
from tfperf.inputs.workload_data import write_workload_data
from tfperf.workloads import get_workload
from tfperf.workloads.deblur import DeblurWorkload, box_blur, decode_png, encode_png

H, W, PATCH = 22, 27, 16  # 7 x 12 possible offsets per image; not square on purpose
OPTS = {"image_height": H, "image_width": W, "patch": PATCH}


def _write(path, schema, rows):
    with tf.io.TFRecordWriter(str(path)) as w:
        for i, row in enumerate(rows):
            w.write(schema.encode(row, i))
    return str(path)


def _tuned(wl, files, batch):
    schema = wl.schema()
    ds = make_dataset(files, PipelineConfig(batch_size=batch), training=False,
                      parse=schema.parse_batch, preprocess=wl.preprocess_batch)  # fmt: skip
    return list(ds.as_numpy_iterator())


def _where(full, crop):
    """Every (row, col) at which `crop` sits inside `full`."""
    windows = np.lib.stride_tricks.sliding_window_view(full, crop.shape)[:, :, 0]
    return [tuple(int(v) for v in p) for p in np.argwhere((windows == crop).all(axis=(2, 3, 4)))]


def _check_pairing(rows, batches):
    """Each sharp patch is found in its image, and the blurred patch sits at that place."""
    i, offsets = 0, []
    for x, y in batches:
        assert x.shape[1:] == (PATCH, PATCH, 3) and x.dtype == np.float32
        for blurred, sharp in zip(x, y, strict=True):
            sharp_u8 = np.rint(sharp * 255).astype(np.uint8)
            blurred_u8 = np.rint(blurred * 255).astype(np.uint8)
            [(oy, ox)] = _where(rows[i]["sharp"], sharp_u8)  # noise makes it unique
            want = rows[i]["blurred"][oy : oy + PATCH, ox : ox + PATCH]
            np.testing.assert_array_equal(blurred_u8, want)
            offsets.append((oy, ox))
            i += 1
    assert i == len(rows)
    return offsets


def _files(wl, raw_rows, tmp_path, name):
    """(decoded rows, converted shard for the tuned pipeline, raw shard for the original)."""
    rows = [wl.offline_preprocess()(r) for r in raw_rows]
    tuned = [_write(tmp_path / f"{name}.tfrecord", wl.schema(), rows)]
    raw = [_write(tmp_path / f"{name}_raw.tfrecord", wl.raw_schema(), raw_rows)]
    return rows, tuned, raw


@pytest.fixture
def data(tmp_path):
    wl = DeblurWorkload(**OPTS, blur_radius=1)
    rows, tuned, raw = _files(wl, list(wl.generate(12, seed=0)), tmp_path, "d")
    return wl, rows, tuned, raw


def test_tuned_random_crop_pairs_blurred_with_sharp(data):
    wl, rows, files, _ = data
    offsets = _check_pairing(rows, _tuned(wl, files, 5))
    assert len(set(offsets)) > 3  # really random patches, not one fixed place
    # An unshuffled evaluation repeats its patches exactly.
    again = _check_pairing(rows, _tuned(wl, files, 5))
    assert again == offsets


def test_original_random_crop_pairs_blurred_with_sharp(data):
    wl, rows, _, files = data
    batches = list(wl.original_dataset(files, 5, training=False, seed=3).as_numpy_iterator())
    assert [len(x) for x, _ in batches] == [5, 5, 2]
    offsets = _check_pairing(rows, batches)
    assert len(set(offsets)) > 3


def test_a_mismatched_pair_is_caught(data):
    # The check above must be able to fail: crop the two images at different places.
    wl, rows, _, _ = data
    sharp = rows[0]["sharp"][2 : 2 + PATCH, 3 : 3 + PATCH]
    blurred = rows[0]["blurred"][3 : 3 + PATCH, 3 : 3 + PATCH]
    with pytest.raises(AssertionError):
        _check_pairing(rows[:1], [(blurred[None] / 255.0, sharp[None] / 255.0)])


def test_center_crop_tuned_matches_original(tmp_path):
    wl = get_workload("deblur", **OPTS, crop="center")
    rows, files, raw = _files(wl, list(wl.generate(7, seed=1)), tmp_path, "c")
    tuned = _tuned(wl, files, 4)
    orig = list(wl.original_dataset(raw, 4, training=False).as_numpy_iterator())
    assert len(tuned) == len(orig) == 2
    for (tx, ty), (ox, oy) in zip(tuned, orig, strict=True):
        np.testing.assert_allclose(tx, ox, atol=1e-6)
        np.testing.assert_allclose(ty, oy, atol=1e-6)
    np.testing.assert_array_equal(np.rint(tuned[0][1][0] * 255), rows[0]["sharp"][3:19, 5:21])


def test_crop_offsets_follow_the_batch_and_allow_checkpoints(data, tmp_path):
    wl, rows, files, _ = data
    batch = {k: tf.constant(np.stack([r[k] for r in rows])) for k in ("blurred", "sharp")}
    first = wl.crop_offsets(batch).numpy()
    np.testing.assert_array_equal(first, wl.crop_offsets(batch).numpy())  # deterministic
    assert first.min() >= 0 and first[:, 0].max() <= H - PATCH and first[:, 1].max() <= W - PATCH
    # Regrouped examples (a reshuffled epoch) draw new patches.
    regrouped = {k: tf.reverse(v, [0]) for k, v in batch.items()}
    assert not np.array_equal(wl.crop_offsets(regrouped).numpy()[::-1], first)
    # Stateless ops: tf.data can save the iterator (a stateful random op could not).
    schema = wl.schema()
    ds = make_dataset(files, PipelineConfig(batch_size=4, seed=0), training=True,
                      parse=schema.parse_batch, preprocess=wl.preprocess_batch)  # fmt: skip
    it = iter(ds)
    next(it)
    ckpt = tf.train.Checkpoint(iterator=it)
    path = ckpt.save(str(tmp_path / "ckpt" / "it"))
    want = next(it)
    ckpt.restore(path)
    got = next(it)
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())


def test_generator_is_deterministic_and_blurred_comes_from_sharp():
    wl = DeblurWorkload(**OPTS, blur_radius=2)
    a = list(wl.generate(3, seed=4))
    b = list(wl.generate(3, seed=4))
    assert all(r["sharp"][:8] == b"\x89PNG\r\n\x1a\n" for r in a)  # raw rows are PNG files
    assert a == b  # the same bytes
    pre = wl.offline_preprocess()
    a, c = [pre(r) for r in a], [pre(r) for r in wl.generate(3, seed=5)]
    for ra, rc in zip(a, c, strict=True):
        assert ra["sharp"].shape == (H, W, 3) and ra["sharp"].dtype == np.uint8
        assert not np.array_equal(ra["sharp"], rc["sharp"])
        np.testing.assert_array_equal(ra["blurred"], box_blur(ra["sharp"], 2))
        assert not np.array_equal(ra["blurred"], ra["sharp"])


def test_box_blur_on_known_values():
    img = np.zeros((5, 5, 1), np.uint8)
    img[2, 2, 0] = 90
    out = box_blur(img, 1)[..., 0]
    assert out[2, 2] == 10 and out[1, 1] == 10 and out[0, 0] == 0  # 90 / 9 in each window
    flat = np.full((4, 4, 3), 77, np.uint8)
    np.testing.assert_array_equal(box_blur(flat, 2), flat)  # edges replicated


def test_png_round_trip_and_bad_size():
    img = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    np.testing.assert_array_equal(decode_png(encode_png(img)), img)  # lossless
    with pytest.raises(ValueError, match=r"expected \(22, 27, 3\)"):
        DeblurWorkload(**OPTS).offline_preprocess()(
            {"blurred": encode_png(img), "sharp": encode_png(img)}
        )
    with pytest.raises(ValueError, match="not a PNG"):
        decode_png(b"GIF89a")


def test_original_sequence_feeds_model_fit(data):
    wl, _, _, files = data
    small = DeblurWorkload(**OPTS, filters=4, blocks=1)
    seq = small.original_sequence(files, 4, seed=0)
    assert isinstance(seq, keras.utils.PyDataset)
    assert len(seq) == 3  # 12 records, training drops no remainder here
    assert pickle.loads(pickle.dumps(seq)).batch_size == 4  # multiprocessing workers pickle it
    model = small.build_model()
    model.compile(optimizer="adam", loss=small.loss)
    hist = model.fit(seq, epochs=1, verbose=0)
    assert np.isfinite(hist.history["loss"][0])
    assert tuple(model(seq[0][0]).shape) == (4, PATCH, PATCH, 3)
    # The original's training stream repeats over epochs and keeps full batches.
    stream = small.original_dataset(files, 5, training=True, seed=0).as_numpy_iterator()
    assert [len(x) for x, _ in itertools.islice(stream, 5)] == [5, 5, 5, 5, 5]


def test_model_output_shape_and_options():
    wl = DeblurWorkload(**OPTS, filters=8, blocks=2)
    x = np.random.default_rng(0).random((2, PATCH, PATCH, 3), dtype=np.float32)
    out = wl.build_model()(x)
    assert tuple(out.shape) == (2, PATCH, PATCH, 3) and out.dtype == "float32"
    with pytest.raises(ValueError, match="patch"):
        DeblurWorkload(image_height=32, image_width=100, patch=64)
    with pytest.raises(ValueError, match="256"):
        DeblurWorkload(image_height=720, image_width=1280, patch=300)
    assert DeblurWorkload(image_height=720, image_width=1280, patch=256).patch == 256
    with pytest.raises(ValueError, match="crop"):
        DeblurWorkload(crop="corner")


@pytest.mark.parametrize("workers", [1, 2])
def test_convert_writes_decoded_and_png_splits(tmp_path, workers):
    # `tfperf convert --workload deblur`'s writer: train/eval decoded by offline_preprocess
    # (rebuilt in worker processes from the options), train_raw/eval_raw as PNG bytes.
    wl = get_workload("deblur", **OPTS)
    write_workload_data(wl, tmp_path, examples=6, eval_examples=2, progress=False,
                        workers=workers)  # fmt: skip
    m = load_manifest(tmp_path)
    assert set(m.splits) == {"train", "eval", "train_raw", "eval_raw"}
    raw_rows = list(wl.generate(6, seed=0))
    want = [wl.offline_preprocess()(r)["sharp"] for r in raw_rows]
    got = [x for _, y in _tuned(wl, m.shard_paths(tmp_path, "train"), 6) for x in y]
    assert len(got) == 6
    raw = m.shard_paths(tmp_path, "train_raw")
    recs = [wl.raw_schema().decode_numpy(r.numpy()) for r in tf.data.TFRecordDataset(raw)]
    assert sorted(r["sharp"] for r in recs) == sorted(r["sharp"] for r in raw_rows)
    # Converted images are the decoded PNGs (each tuned patch sits inside one of them).
    for patch in got:
        u8 = np.rint(patch * 255).astype(np.uint8)
        assert sum(len(_where(img, u8)) for img in want) == 1
