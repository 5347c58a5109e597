"""Vectorized rewrites of per-example maps (doctor/rewrites/vectorize.py) on real TFRecord
files: map(f).batch(n) becomes batch(n).map(pfor(f)) with the same examples, one batched parse
instead of one per example; maps pfor cannot convert stay per-example, parallel, with the
reason; a zip of two shuffled arrays mixed by a random per-example map (issue 19's CutMix)
is vectorized after the batch, each example keeping its own draw."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.saved_model import function_deserialization

from tfperf.doctor.fix.candidates import dataset_candidates
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.edits import example_multiset, same_examples
from tfperf.doctor.rewrites.pfor_fn import library_of
from tfperf.doctor.rewrites.vectorize import vectorize_maps

N = 100  # not a multiple of the batch sizes: a partial last batch
DIM = 16
SPEC = {
    "x": tf.io.FixedLenFeature([DIM], tf.float32),
    "y": tf.io.FixedLenFeature([1], tf.float32),
    "id": tf.io.FixedLenFeature([], tf.int64),
    "name": tf.io.FixedLenFeature([], tf.string),
    "png": tf.io.FixedLenFeature([], tf.string),
}


def write_examples(folder: Path, n: int = N, files: int = 2) -> list[str]:
    """`files` TFRecord shards of Examples: floats, an int, a string and an 8x8 PNG."""
    rng = np.random.default_rng(0)
    paths = []
    for f in range(files):
        path = folder / f"part-{f}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as w:
            for i in range(f, n, files):
                img = rng.integers(0, 255, size=(8, 8, 3), dtype=np.uint8)
                feats = {
                    "x": tf.train.Feature(
                        float_list=tf.train.FloatList(value=rng.normal(size=DIM))
                    ),
                    "y": tf.train.Feature(float_list=tf.train.FloatList(value=[i % 2])),
                    "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                    "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"ex%d" % i])),
                    "tags": tf.train.Feature(int64_list=tf.train.Int64List(value=[i] * (i % 4))),
                    "png": tf.train.Feature(
                        bytes_list=tf.train.BytesList(value=[tf.io.encode_png(img).numpy()])
                    ),
                }
                ex = tf.train.Example(features=tf.train.Features(feature=feats))
                w.write(ex.SerializeToString())
        paths.append(str(path))
    return paths


def parse(record: tf.Tensor) -> dict:
    return tf.io.parse_single_example(record, SPEC)


def normalize(ex: dict) -> tuple:
    features = {"x": (ex["x"] - 1.0) / 2.0, "id": tf.cast(ex["id"], tf.int32), "name": ex["name"]}
    return features, ex["y"]


def functions_of(graph_def, stage: lint.GraphStage) -> dict:
    """The stage's function and those it calls, loaded as ConcreteFunctions."""
    node = next(n for n in graph_def.node if n.name == stage.name)
    lib = library_of(graph_def, node.attr["f"].func.name)
    return function_deserialization.load_function_def_library(lib)


def ops_of(graph_def, stage: lint.GraphStage) -> list:
    return [op for f in functions_of(graph_def, stage).values() for op in f.graph.get_operations()]


@pytest.mark.parametrize("drop", [False, True])
def test_parse_and_normalize_become_one_batched_parse(tmp_path, drop):
    files = write_examples(tmp_path)
    ds = tf.data.TFRecordDataset(files).map(parse).map(normalize).batch(32, drop_remainder=drop)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and len(result.done) == 1, result
    assert result.dataset.element_spec == ds.element_spec
    assert same_examples(ds, result.dataset)
    assert sum(example_multiset(result.dataset).values()) == (96 if drop else N)
    after = lint.read_graph(result.dataset)
    kinds = [s.kind for s in after.stages]
    assert kinds[-3:] == ["batch", "map", "map"], kinds  # files -> flat_map(TFRecordDataset)
    # no per-example parse is left: one ParseExampleV2 on the batch's vector of records
    assert not [s for s in after.stages if s.has_parse and not s.batched]
    parse_stage = after.stages[-2]
    ops = ops_of(after.graph_def, parse_stage)
    parses = [op for op in ops if op.type == "ParseExampleV2"]
    assert len(parses) == 1 and parses[0].inputs[0].shape.rank == 1
    assert not [op for op in ops if "While" in op.type]


def test_a_map_moves_across_shuffle_and_prefetch(tmp_path):
    files = write_examples(tmp_path)
    shuffled = tf.data.TFRecordDataset(files).map(parse)
    ds = shuffled.shuffle(64, seed=1, reshuffle_each_iteration=False).prefetch(2)
    ds = ds.map(normalize).batch(16).prefetch(1)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and result.done, result
    kinds = [s.kind for s in lint.read_graph(result.dataset).stages]
    assert kinds[-6:] == ["shuffle", "prefetch", "batch", "map", "map", "prefetch"], kinds
    # the shuffle draws the same order from its seed whatever the elements hold (a graph
    # rebuilt from a reshuffling one starts from another seed: the same multiset only)
    for a, b in zip(ds, result.dataset, strict=True):
        assert np.array_equal(a[0]["id"], b[0]["id"]) and np.allclose(a[0]["x"], b[0]["x"])


def test_string_ops_and_a_vocabulary_lookup_are_vectorized(tmp_path):
    files = write_examples(tmp_path)
    vocab = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            [b"EX1", b"EX2", b"EX3"], [1, 2, 3], tf.string, tf.int64
        ),
        default_value=0,
    )

    def categorical(ex: dict) -> dict:
        name = tf.strings.upper(ex["name"])
        return {"word": vocab.lookup(name), "hash": tf.strings.to_hash_bucket_fast(name, 50)}

    ds = tf.data.TFRecordDataset(files).map(parse).map(categorical).batch(16)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and result.done, result
    assert same_examples(ds, result.dataset)
    words = np.concatenate([b["word"].numpy() for b in result.dataset])
    assert sorted(set(words)) == [0, 1, 2, 3]


def write_raw_images(path: Path, n: int = N) -> str:
    """Examples of an 8x8x1 uint8 image stored as raw bytes (not PNG) and an id."""
    rng = np.random.default_rng(1)
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(n):
            img = rng.integers(0, 255, size=(8, 8, 1), dtype=np.uint8)
            feats = {
                "raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[img.tobytes()])),
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
            }
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return str(path)


@pytest.mark.parametrize("padded", [False, True])
def test_images_stored_as_raw_bytes_are_decoded_per_batch(tmp_path, padded):
    raw_spec = {
        "raw": tf.io.FixedLenFeature([], tf.string),
        "id": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(record):
        ex = tf.io.parse_single_example(record, raw_spec)
        if padded:  # DecodePaddedRaw
            img = tf.io.decode_raw(ex["raw"], tf.uint8, fixed_length=64)
        else:
            img = tf.io.decode_raw(ex["raw"], tf.uint8)
        img = tf.cast(tf.reshape(img, [8, 8, 1]), tf.float32) / 255.0
        return {"img": img, "id": ex["id"]}

    ds = tf.data.TFRecordDataset(write_raw_images(tmp_path / "raw.tfrecord")).map(decode)
    ds = ds.batch(16)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and result.done, result
    assert same_examples(ds, result.dataset)
    after = lint.read_graph(result.dataset)
    ops = ops_of(after.graph_def, after.stages[-1])
    decodes = [op for op in ops if op.type in ("DecodeRaw", "DecodePaddedRaw")]
    assert len(decodes) == 1 and decodes[0].inputs[0].shape.rank == 1


def test_in_memory_images_resized_and_flipped_are_vectorized():
    images = np.random.default_rng(0).integers(0, 255, size=(20, 12, 12, 3)).astype("uint8")

    def augment(img: tf.Tensor) -> tf.Tensor:
        img = tf.image.resize(tf.cast(img, tf.float32) / 255.0, [8, 8])
        return tf.image.flip_left_right(img) - tf.reduce_mean(img, axis=[0, 1])

    ds = tf.data.Dataset.from_tensor_slices(images).map(augment).batch(6)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and result.done, result
    assert same_examples(ds, result.dataset)


def test_decode_and_resize_stay_per_example_in_parallel(tmp_path):
    files = write_examples(tmp_path)

    def decode(ex: dict) -> tuple:
        img = tf.image.resize(tf.io.decode_png(ex["png"], channels=3), [16, 16])
        return img, ex["y"]

    ds = tf.data.TFRecordDataset(files).map(parse).map(decode)
    ds = ds.map(lambda img, y: (img / 255.0, y)).batch(16)
    result = vectorize_maps(lint.read_graph(ds), ds)
    reasons = dict(result.fallbacks)
    stages = lint.read_graph(ds).stages
    assert "decodes images one at a time (DecodePng)" in reasons[stages[-3].label]
    assert f"comes before {stages[-3].label}" in reasons[stages[-4].label]
    # the scaling after decode is vectorized; parse and decode run per example, in parallel
    after = lint.read_graph(result.dataset).stages
    assert [s.kind for s in after][-4:] == ["map", "map", "batch", "map"]
    assert [s.parallelism for s in after[-4:-2]] == [lint.AUTOTUNE, lint.AUTOTUNE]
    assert same_examples(ds, result.dataset)


def test_the_fix_candidate_says_which_maps_stay_per_example_and_why(tmp_path):
    files = write_examples(tmp_path)
    png = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, SPEC)["png"])
    ds = png.map(lambda b: tf.io.decode_png(b, channels=3)).map(lambda i: i // 2).batch(8)
    from tfperf.doctor.fix.trials import Skipped

    graph = lint.read_graph(ds)
    cands = dict(dataset_candidates(graph, ds, None))
    # Nothing vectorized (every map stays per-example): no "vectorize" to keep; the reason.
    said = r"stays per-example: the map decodes images one at a time \(DecodePng\)"
    with pytest.raises(Skipped, match=f"nothing vectorized: .*{said}"):
        cands["vectorize per-example maps"](ds, graph)
    # The candidate that makes the maps parallel names what failed to vectorize.
    fixed = cands["parallel maps (also py_function)"](ds, graph)
    assert "the vectorizer failed: the map decodes images one at a time (DecodePng)" in (
        fixed.doctor_note
    )
    assert same_examples(ds, fixed)


def test_numpy_function_falls_back_with_the_reason(tmp_path):
    files = write_examples(tmp_path)

    def py(ex: dict) -> tuple:
        x = tf.numpy_function(lambda v: v * 2.0, [ex["x"]], tf.float32)
        return tf.ensure_shape(x, [DIM]), ex["y"]

    ds = tf.data.TFRecordDataset(files).map(parse).map(py).batch(32)
    result = vectorize_maps(lint.read_graph(ds), ds)
    label = lint.read_graph(ds).stages[-2].label
    why = "the map calls a Python function (numpy_function), which TensorFlow cannot vectorize"
    assert (label, why) in result.fallbacks
    assert result.done == []
    after = lint.read_graph(result.dataset).stages
    assert [s.parallelism for s in after if s.kind == "map"] == [lint.AUTOTUNE] * 2
    assert same_examples(ds, result.dataset)


def test_varlen_features_parse_to_the_same_sparse_batches(tmp_path):
    files = write_examples(tmp_path)
    spec = {"tags": tf.io.VarLenFeature(tf.int64), "y": SPEC["y"]}
    ds = tf.data.TFRecordDataset(files).map(lambda r: tf.io.parse_single_example(r, spec))
    ds = ds.batch(8)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and result.done, result
    pairs = list(zip(ds, result.dataset, strict=True))
    assert len(pairs) == 13  # 12 full batches and a partial one
    for a, b in pairs:
        for part in ("indices", "values", "dense_shape"):
            assert np.array_equal(getattr(a["tags"], part), getattr(b["tags"], part))
        assert np.array_equal(a["y"], b["y"])


def test_per_example_text_splitting_falls_back_with_the_reason():
    ds = tf.data.Dataset.from_tensor_slices(["a b", "c d e", "f"] * 4)
    ds = ds.map(lambda s: tf.strings.split(s)[:1]).batch(4)
    result = vectorize_maps(lint.read_graph(ds), ds)
    (_, why), *_ = result.fallbacks
    assert why == (
        "the map splits text into a different number of pieces per example (StringSplitV2), "
        "which TensorFlow's vectorizer cannot batch"
    )
    assert same_examples(ds, result.dataset)


def test_unseeded_random_map_is_vectorized():
    ds = tf.data.Dataset.range(64).map(lambda i: tf.cast(i, tf.float32) + tf.random.uniform([4]))
    ds = ds.batch(16)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and result.done, result
    rows = np.concatenate([b.numpy() for b in result.dataset])
    noise = rows - np.arange(64, dtype=np.float32)[:, None]
    # one independent draw per example, as per-example calls gave
    assert rows.shape == (64, 4) and (noise >= 0).all() and (noise < 1).all()
    assert len(np.unique(noise.round(5))) > 200


def test_per_example_control_flow_is_vectorized():
    def branchy(x: tf.Tensor) -> tf.Tensor:
        return tf.cond(x % 3 == 0, lambda: x * 2, lambda: x + 100)

    ds = tf.data.Dataset.range(10).map(branchy).batch(4)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.done and result.fallbacks == []
    assert same_examples(ds, result.dataset)


def test_a_stateful_map_runs_once_per_batch_not_also_per_example(tmp_path):
    log = tmp_path / "printed.txt"

    def noisy(x: tf.Tensor) -> tf.Tensor:
        tf.print(x, output_stream=f"file://{log}")
        return x * 2

    ds = tf.data.Dataset.range(8).map(noisy).batch(4)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.done and result.fallbacks == []
    assert [list(b.numpy()) for b in result.dataset] == [[0, 2, 4, 6], [8, 10, 12, 14]]
    # pfor's leftover per-example call (on each batch's first element) was pruned
    assert log.read_text().split("\n")[:-1] == ["[0 1 2 3]", "[4 5 6 7]"]


def test_nothing_to_vectorize_after_the_batch():
    ds = tf.data.Dataset.range(64).batch(16).map(lambda x: x * 2)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.dataset is None and result.done == [] and result.fallbacks == []


USER_PIPELINE = """
import keras
import tensorflow as tf

SPEC = {"x": tf.io.FixedLenFeature([16], tf.float32), "y": tf.io.FixedLenFeature([1], tf.float32)}
FILES = FILES_HERE


def make_dataset(batch_size=32, **_):
    def parse(record):
        ex = tf.io.parse_single_example(record, SPEC)
        return (ex["x"] - 1.0) / 2.0, ex["y"]

    return tf.data.TFRecordDataset(FILES).map(parse).batch(batch_size)


def model():
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])
"""


def test_doctor_fix_keeps_the_vectorize_rewrite(tmp_path, cli):
    files = write_examples(tmp_path, n=1024)
    code = USER_PIPELINE.replace("FILES_HERE", repr(files))
    (tmp_path / "user_pipe_vec.py").write_text(textwrap.dedent(code))
    run = tmp_path / "run.yaml"
    run.write_text(
        "data:\n  pipeline: user_pipe_vec:make_dataset\n"
        "model:\n  name: user_pipe_vec:model\n  loss: mse\n"
        "pipeline:\n  batch_size: 256\n"
        "doctor: {steps: 6, warmup: 2, repeats: 2, min_seconds: 0.1, what_ifs: []}\n"
    )
    res = cli("doctor", run, "--fix", "--json")  # in this process: TensorFlow is loaded
    assert res.exit_code == 0, res.output[-3000:]
    fix = json.loads(res.stdout)["fix"]
    trial = next(t for t in fix["trials"] if t["name"] == "vectorize per-example maps")
    assert trial["kept"], [
        (t["name"], t["ratio"], t["low"], t["high"], t["reason"]) for t in fix["trials"]
    ]
    assert "vectorize per-example maps" in fix["pipeline_changes"]
    assert trial["ratio"] > 2.0, trial


# ---- issue 19's CutMix-style pipeline -----------------------------------------------------
# Two shuffled copies of an array zipped, a per-example map drawing from tf.random.gamma
# (stateful) with a Python `if` (autograph's cond) and a mixing mask, then a batch. The batch
# moves right after the zip (each side batched, then one map on the batch) and pfor converts
# the stateful random draws per example: each example keeps its own draw. A crop padded back
# to a fixed shape, of a per-example size, becomes a masked gather first (masked_crop.py).
PAIRS, SIDE, CLASSES = 256, 8, 10


def _pairs() -> tf.data.Dataset:
    rng = np.random.default_rng(0)
    x = rng.random((PAIRS, SIDE, SIDE, 1), dtype=np.float32)
    y = rng.integers(0, CLASSES, PAIRS)
    a = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(PAIRS)
    b = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(PAIRS)
    return tf.data.Dataset.zip((a, b))


def _lam() -> tf.Tensor:
    g1, g2 = tf.random.gamma([], 0.5), tf.random.gamma([], 0.5)
    return g1 / (g1 + g2)


@tf.function
def mix(sa, sb):
    (ia, la), (ib, lb) = sa, sb
    lam = _lam()
    if lam < 0.05:  # autograph: a cond per example
        lam = tf.constant(0.0)
    h = tf.cast(SIDE * tf.sqrt(1.0 - lam), tf.int32)
    r = tf.range(SIDE)
    mask = tf.cast((r[:, None] < h) & (r[None, :] < h), ia.dtype)[..., None]
    share = tf.cast(h * h, tf.float32) / SIDE**2
    label = tf.one_hot(la, CLASSES) * (1.0 - share) + tf.one_hot(lb, CLASSES) * share
    return ia * (1.0 - mask) + ib * mask, label


def test_zip_then_a_random_per_example_map_is_vectorized_after_the_batch():
    ds = _pairs().map(mix).batch(32)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.done and result.fallbacks == [], result.fallbacks
    kinds = [s.kind for s in lint.read_graph(result.dataset).stages]
    assert kinds[-3:] == ["other", "batch", "map"], kinds  # zip -> batch -> one map
    shares = []
    for images, labels in result.dataset:
        assert images.shape[1:] == (SIDE, SIDE, 1) and labels.shape[1:] == (CLASSES,)
        # Each example's label still sums to 1: its own draw mixes its own pair.
        np.testing.assert_allclose(tf.reduce_sum(labels, axis=1).numpy(), 1.0, rtol=1e-5)
        shares.append(labels.numpy().max(axis=1))
    # Per example, not one draw for the whole batch: the batch's mixes differ.
    assert all(len(np.unique(np.round(s, 4))) > 1 for s in shares)


def test_a_crop_of_a_per_example_size_padded_back_is_vectorized_after_the_batch():
    @tf.function
    def crop_mix(sa, sb):
        (ia, la), (ib, _) = sa, sb
        h = tf.cast(SIDE * tf.sqrt(1.0 - _lam()), tf.int32) + 1
        patch = tf.image.crop_to_bounding_box(ib, 0, 0, h, h)
        return ia + tf.image.pad_to_bounding_box(patch, 0, 0, SIDE, SIDE), la, ia, ib, h

    ds = _pairs().map(crop_mix).batch(32)
    result = vectorize_maps(lint.read_graph(ds), ds)
    assert result.fallbacks == [] and len(result.done) == 1, result.fallbacks
    kinds = [s.kind for s in lint.read_graph(result.dataset).stages]
    assert kinds[-3:] == ["other", "batch", "map"], kinds  # zip -> batch -> one map
    sizes = set()
    for mixed, _, ia, ib, h in result.dataset.as_numpy_iterator():
        for k in range(len(h)):  # each example: its own h x h corner of b pasted on a
            r = np.arange(SIDE)
            box = ((r[:, None] < h[k]) & (r[None, :] < h[k]))[..., None]
            np.testing.assert_allclose(mixed[k], ia[k] + np.where(box, ib[k], 0), rtol=1e-6)
        sizes |= set(h.tolist())
    assert len(sizes) > 2  # drawn per example
