"""Chess (seed E): bit unpacking on a hand-built record, tuned vs original values,
generator determinism and one forward pass."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import PipelineConfig
from tfperf.data.pipeline import make_dataset
from tfperf.workloads import get_workload
from tfperf.workloads.chess import (
    PLANE_ORDER,
    ChessWorkload,
    combined_score_numpy,
    pack_position,
)


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


def _hand_built():
    bits = np.zeros((8, 8, 24), np.uint8)
    bits[0, 0, 0] = 1  # plane 0 -> output plane 0, positive
    bits[2, 3, 1] = 1  # plane 1 -> output plane 6, negated
    bits[7, 7, 23] = 1  # plane 23 -> output plane 23, negated
    bits[4, 5, 2] = 1  # plane 2 -> output plane 12, positive
    bits[1, 6, 20] = 1  # plane 20 -> output plane 5, positive
    flags = [1, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    return bits, flags


@pytest.mark.parametrize("variant", ["tuned", "original"])
def test_unpacking_of_a_hand_built_record(tmp_path, variant):
    wl = ChessWorkload(a=0.9, k=400.0, b=10.0)
    bits, flags = _hand_built()
    rows = [
        {"d": pack_position(bits, flags, 0), "s": 200},  # an evaluation
        {"d": pack_position(bits, flags, 1), "s": 3},  # mate in 3 for the side to move
        {"d": pack_position(bits, flags, 1), "s": -12},  # mated beyond the horizon B
        {"d": pack_position(bits, flags, 1), "s": -1},  # mated in 1
    ]
    assert len(rows[0]["d"]) == 194
    files = [_write(tmp_path / "c.tfrecord", wl.schema(), rows)]
    if variant == "tuned":
        [(feats, score)] = _tuned(wl, files, 8)
    else:
        ds = wl.original_dataset(files, 8, training=False)
        [(feats, score)] = ds.as_numpy_iterator()
        assert feats["board"].dtype == np.float64  # the question used float64 throughout
    board = feats["board"]
    assert board.shape == (4, 8, 8, 24)
    expected = np.zeros((8, 8, 24))
    expected[0, 0, 0] = 1
    expected[2, 3, 6] = -1
    expected[7, 7, 23] = -1
    expected[4, 5, 12] = 1
    expected[1, 6, 5] = 1
    for i in range(4):
        np.testing.assert_array_equal(board[i], expected)
    np.testing.assert_array_equal(feats["flags"], np.tile(flags, (4, 1)))
    a, k, b = 0.9, 400.0, 10.0
    want = [a * np.tanh(200 / k), a + (1 - a) / (b - 1) * (b - 3), -a, -1.0]
    np.testing.assert_allclose(score[:, 0], want, rtol=1e-6)
    np.testing.assert_allclose(want, combined_score_numpy([200, 3, -12, -1], [0, 1, 1, 1], a, k, b))


def test_plane_order_signs(tmp_path):
    wl = ChessWorkload()
    bits = np.zeros((8, 8, 24), np.uint8)
    bits[3, 3, :] = 1  # every plane set on one square
    row = {"d": pack_position(bits, [0] * 10, 0), "s": 0}
    files = [_write(tmp_path / "p.tfrecord", wl.schema(), [row])]
    [(feats, _)] = _tuned(wl, files, 1)
    signs = feats["board"][0, 3, 3]
    np.testing.assert_array_equal(signs, [-1.0 if p < 0 else 1.0 for p in PLANE_ORDER])
    assert signs[0] == 1.0  # "0" is plane 0, not negated


def test_tuned_matches_original(tmp_path):
    wl = get_workload("chess", mate_fraction=0.3)
    rows = list(wl.generate(70, seed=3))
    files = [_write(tmp_path / "train-0.tfrecord", wl.schema(), rows)]
    tuned = _tuned(wl, files, 16)
    orig = list(wl.original_dataset(files, 16, training=False).as_numpy_iterator())
    assert [len(y) for _, y in tuned] == [16, 16, 16, 16, 6]  # eval keeps the remainder
    assert len(orig) == len(tuned)
    for (tx, ty), (ox, oy) in zip(tuned, orig, strict=True):
        for key in ("board", "flags"):
            np.testing.assert_array_equal(tx[key], ox[key].astype(np.float32))
        np.testing.assert_allclose(ty, oy.astype(np.float32), rtol=1e-5, atol=1e-6)
    scores = np.concatenate([y for _, y in tuned])
    assert np.abs(scores).max() <= 1.0
    assert (np.abs(scores) >= 0.9 - 1e-6).any()  # some mates were generated


def test_original_training_repeats_and_drops_remainder(tmp_path):
    wl = ChessWorkload()
    rows = list(wl.generate(20, seed=0))
    files = [_write(tmp_path / f"s{i}.tfrecord", wl.schema(), rows[i::2]) for i in range(2)]
    ds = wl.original_dataset(files, 8, training=True, seed=1)
    batches = list(itertools.islice(ds.as_numpy_iterator(), 6))  # > one epoch (2 batches)
    assert all(y.shape == (8, 1) for _, y in batches)


def test_generator_is_deterministic():
    wl = ChessWorkload()
    a = list(wl.generate(30, seed=7))
    b = list(wl.generate(30, seed=7))
    c = list(wl.generate(30, seed=8))
    assert [r["d"] for r in a] == [r["d"] for r in b]
    assert [int(r["s"]) for r in a] == [int(r["s"]) for r in b]
    assert [r["d"] for r in a] != [r["d"] for r in c]
    for r in a:
        wl.raw_schema().validate_row(r)
        bits = np.unpackbits(np.frombuffer(r["d"], np.uint8))
        board = bits[:1536].reshape(64, 24)
        assert board[:, 0::4].sum() + board[:, 1::4].sum() <= 32  # at most 32 pieces
        assert board[:, 20].sum() == 1 and board[:, 21].sum() == 1  # one king a side
        assert bits[1547:].sum() == 0  # padding bits stay clear


def test_model_forward_pass(tmp_path):
    wl = ChessWorkload(filters=8)
    files = [_write(tmp_path / "c.tfrecord", wl.schema(), wl.generate(5, seed=0))]
    [(x, y)] = _tuned(wl, files, 5)
    model = wl.build_model()
    out = model(x)
    assert tuple(out.shape) == (5, 1)
    import keras

    per_example = keras.losses.get(wl.loss)(y, out)  # labels line up with outputs
    assert tuple(per_example.shape) == (5,)
    assert np.isfinite(per_example.numpy()).all()
