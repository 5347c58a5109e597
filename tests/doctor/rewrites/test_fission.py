"""Map fission (doctor/rewrites/fission.py) on real JPEG files written by the test: a map that
reads and decodes one file per example, then resizes, normalizes and flips, is split after the
resize; the batch moves before the rest, which runs vectorized once per batch, with the same
examples; a map calling Python throughout is left alone; --fix offers and tries the split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.fix.candidates import dataset_candidates
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.fission import split_maps, split_site
from tfperf.doctor.rewrites.pfor_fn import Refused
from tfperf.doctor.rules.per_example import BATCH_FIRST, FISSION, VECTORIZE
from tfperf.testing import assert_same_examples

N = 30  # not a multiple of the batch: a partial last batch
SIDE = 16


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """N JPEG files of random images, each of its own size (a shape per example)."""
    folder: Path = tmp_path_factory.mktemp("jpegs")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(N):
        h, w = (int(v) for v in rng.integers(12, 40, size=2))
        img = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
        path = str(folder / f"{i}.jpg")
        tf.io.write_file(path, tf.io.encode_jpeg(img))
        paths.append(path)
    return paths


def load(path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
    img = tf.image.resize(tf.image.convert_image_dtype(img, tf.float32), [SIDE, SIDE])
    img = tf.image.flip_left_right(img)
    img = tf.image.adjust_saturation(img, 1.5)
    return (img - 0.5) / 0.25, tf.strings.length(path)


def pipeline(paths: list[str], fn=load, batch: int = 8) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices(paths).map(fn).batch(batch)


def map_ops(ds: tf.data.Dataset) -> list[tuple[str, bool, set[str]]]:
    """(kind, batched, ops) of each map stage."""
    return [(s.kind, s.batched, s.fn_ops) for s in lint.read_graph(ds).stages if s.kind == "map"]


def test_decode_then_resize_is_split_after_the_resize_with_the_same_examples(jpegs):
    ds = pipeline(jpegs)
    graph = lint.read_graph(ds)
    assert split_site(graph) is not None
    out = split_maps(graph, ds)
    assert out is not None
    (_, b1, first), (_, b2, second) = map_ops(out)
    # The per-example part reads, decodes and resizes; the batch comes before the rest.
    assert not b1 and {"ReadFile", "DecodeJpeg", "ResizeBilinear"} <= first
    assert "AdjustSaturation" not in first and "ReverseV2" not in first
    assert b2 and "DecodeJpeg" not in second and "ReadFile" not in second
    kinds = [s.kind for s in lint.read_graph(out).stages]
    assert kinds.index("batch") < len(kinds) - 1 and kinds[-1] == "map"
    assert "split" in out.doctor_note and "DecodeJpeg" in out.doctor_note
    assert_same_examples(ds, out)
    # Batched: the vectorized part really takes [batch, SIDE, SIDE, 3].
    images, lengths = next(iter(out))
    assert images.shape == (8, SIDE, SIDE, 3) and lengths.shape == (8,)


def test_a_random_flip_after_the_decode_is_vectorized_each_example_its_own_draw(jpegs):
    def aug(path: tf.Tensor) -> tf.Tensor:
        img = tf.io.decode_png(tf.io.read_file(path), channels=3)  # decode_png reads JPEG too
        img = tf.image.resize(tf.cast(img, tf.float32), [SIDE, SIDE])
        return tf.image.random_flip_left_right(tf.image.random_brightness(img, 0.2))

    ds = pipeline(jpegs, aug)
    out = split_maps(lint.read_graph(ds), ds)
    assert out is not None
    ops = map_ops(out)[-1][2]
    assert "RandomUniform" in ops and "DecodePng" not in ops
    batch = next(iter(out)).numpy()
    assert batch.shape == (8, SIDE, SIDE, 3)
    # Per example draws: the brightness shifts differ within one batch.
    means = [float(np.mean(b)) for b in batch]
    assert len({round(m, 4) for m in means}) > 1


def test_a_map_calling_python_throughout_is_left_alone(jpegs):
    def py(path: tf.Tensor) -> tf.Tensor:
        out = tf.py_function(lambda p: np.float32(len(p.numpy())), [path], tf.float32)
        out.set_shape([])
        return out

    ds = pipeline(jpegs, py)
    graph = lint.read_graph(ds)
    assert split_site(graph) is None
    with pytest.raises(Refused, match="Python"):
        split_maps(graph, ds)
    names = [n for n, _ in dataset_candidates(graph, ds, None)]
    assert FISSION.label not in names


def test_a_map_that_vectorizes_whole_is_not_split(jpegs):
    ds = tf.data.Dataset.range(20).map(lambda i: tf.cast(i, tf.float32) * 2.0).batch(4)
    graph = lint.read_graph(ds)
    assert split_site(graph) is None and split_maps(graph, ds) is None


def test_nothing_after_the_decode_leaves_nothing_to_split(jpegs):
    def only_decode(path: tf.Tensor) -> tf.Tensor:
        return tf.image.resize(tf.io.decode_jpeg(tf.io.read_file(path), channels=3), [8, 8])

    ds = pipeline(jpegs, only_decode)
    with pytest.raises(Refused, match="nothing after"):
        split_maps(lint.read_graph(ds), ds)


def test_fix_offers_and_tries_the_split(jpegs):
    ds = pipeline(jpegs * 4).prefetch(2)
    graph = lint.read_graph(ds)
    names = [n for n, _ in dataset_candidates(graph, ds, None)]
    # vectorize, then the move of a map that takes a batch whole (it fails fast on a decode),
    # then the split
    assert names.index(VECTORIZE.label) + 2 == names.index(FISSION.label)
    assert names.index(BATCH_FIRST.label) == names.index(VECTORIZE.label) + 1
    # The smallest measurements the doctor takes: the trial is what is read, not its figure.
    fast = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]
    _, report = tfperf.optimize(ds, None, budget_s=60, overrides=fast)
    rows = {t.name: t for t in report.fix.trials}
    assert FISSION.label in rows, list(rows)
    trial = rows[FISSION.label]
    # Checked (the same examples) and timed, kept or not by the timing alone.
    assert trial.examples_per_s is not None and trial.ratio is not None, trial
    assert "split: per example up to DecodeJpeg, ReadFile" in trial.reason, trial


def test_a_random_crop_box_then_decode_and_crop_is_split_a_refused_contrast_kept_per_example(
    jpegs,
):
    """Inception-style: the crop box drawn from the JPEG's header, decode_and_crop, resize,
    flip and a random contrast (whose factor pfor needs shared: kept per example on the
    second attempt), then a normalization by a captured variable, vectorized."""
    mean = tf.Variable([0.4, 0.5, 0.6])

    def crop(path: tf.Tensor) -> dict:
        data = tf.io.read_file(path)
        box = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.io.extract_jpeg_shape(data), box, area_range=(0.3, 1.0), min_object_covered=0.1
        )
        window = tf.stack([begin[0], begin[1], size[0], size[1]])
        img = tf.image.decode_and_crop_jpeg(data, window, channels=3)
        img = tf.image.resize(img, [SIDE, SIDE]) / 255.0
        img = tf.image.random_contrast(tf.image.random_flip_left_right(img), 0.8, 1.2)
        return {"image": (img - mean) * 4.0, "n": tf.strings.length(path)}

    ds = pipeline(jpegs, crop)
    out = split_maps(lint.read_graph(ds), ds)
    assert out is not None
    (_, b1, first), (_, b2, second) = map_ops(out)
    assert not b1 and {"SampleDistortedBoundingBoxV2", "AdjustContrastv2"} <= first
    assert b2 and {"ReadVariableOp", "StringLength"} <= second and "DecodeAndCropJpeg" not in second
    assert "SampleDistortedBoundingBoxV2" in out.doctor_note
    sizes = [int(b["n"].shape[0]) for b in out]
    assert sizes == [8, 8, 8, 6] and next(iter(out))["image"].shape == (8, SIDE, SIDE, 3)


def test_apply_rewrites_replays_the_split_by_its_name(jpegs):
    ds = pipeline(jpegs)
    out = tfperf.apply_rewrites(ds, [FISSION.label])
    assert [b for _, b, _ in map_ops(out)] == [False, True]
    assert_same_examples(ds, out)


def test_a_tfrecord_parse_then_decode_keeps_the_label_beside_the_image(tmp_path):
    """The common TFRecord case: parse_single_example, decode, resize, normalize, a one-hot
    label; the label crosses the batch beside the resized image, the same examples."""
    rng = np.random.default_rng(2)
    path = str(tmp_path / "images.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for i in range(N):
            h, wd = (int(v) for v in rng.integers(10, 30, size=2))
            img = rng.integers(0, 255, size=(h, wd, 3), dtype=np.uint8)
            feats = {
                "image": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[tf.io.encode_jpeg(img).numpy()])
                ),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 4])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }

    def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        ex = tf.io.parse_single_example(record, spec)
        img = tf.cast(tf.io.decode_jpeg(ex["image"], channels=3), tf.float32)
        img = tf.image.resize(img, [SIDE, SIDE], method="nearest")
        return tf.image.flip_up_down(img / 127.5 - 1.0), tf.one_hot(ex["label"], 4)

    ds = tf.data.TFRecordDataset(path).map(parse, num_parallel_calls=2).batch(8)
    out = split_maps(lint.read_graph(ds), ds)
    assert out is not None
    (_, _, first), (_, b2, second) = map_ops(out)
    assert "ParseExampleV2" in first or "ParseSingleExample" in first
    assert b2 and "OneHot" in second and "DecodeJpeg" not in second
    assert_same_examples(ds, out)
