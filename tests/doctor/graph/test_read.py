"""The doctor's static reading of a tf.data pipeline (doctor/graph/read.py): the chain of stages
from the dataset's graph with each stage's op, settings (parallelism, determinism, batch and
buffer sizes, files read) and the ops inside its functions; Python functions, parses and
generators found; a stage that yields blocks of records a later unbatch splits; nothing
runs."""

from __future__ import annotations

import tensorflow as tf

from tfperf.doctor.graph import lint

from helpers import slow_pipelines as sp
from helpers.doctorkit import blocked_pipeline


# ---- static lint ----------------------------------------------------------------------------
def test_chain_reads_ops_settings_and_functions():
    ds = (
        tf.data.Dataset.range(64)
        .shuffle(10)
        .map(lambda x: tf.py_function(lambda v: v * 2, [x], tf.int64))
        .map(lambda x: tf.cast(x, tf.float64), num_parallel_calls=3, deterministic=True)
        .batch(8)
        .prefetch(2)
    )
    g = lint.read_graph(ds)
    kinds = [s.kind for s in g.stages]
    assert kinds == ["source", "shuffle", "map", "map", "batch", "prefetch"]
    shuffle, pymap, castmap, batch, prefetch = g.stages[1:]
    assert shuffle.buffer_size == 10
    assert pymap.parallelism is None and pymap.has_py_func
    assert castmap.parallelism == 3 and castmap.deterministic == "true"
    assert not castmap.has_py_func and castmap.output_dtypes == ["float64"]
    assert batch.batch_size == 8 and batch.batched and not castmap.batched
    assert prefetch.buffer_size == 2
    assert g.batch_size == 8
    assert lint.float64_outputs(g) == ["element"]


def test_parse_files_generator_and_autotune(tmp_path):
    files = sp.write_records(tmp_path, files=3, n=30)
    seq = lint.read_graph(
        tf.data.TFRecordDataset(files).map(lambda s: tf.io.parse_single_example(s, sp.SPEC))
    )
    read, parse = seq.stages[-2:]
    assert read.kind == "flat_map" and read.reads_files and read.files == 3
    assert parse.has_parse and not parse.batched
    par = lint.read_graph(
        tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE
        )
    )
    assert par.stages[-1].kind == "interleave" and par.stages[-1].parallelism == lint.AUTOTUNE
    gen = lint.read_graph(sp.from_generator(8))
    assert any(s.is_generator for s in gen.stages)


def test_labels_name_the_kind_index_and_settings():
    ds = tf.data.Dataset.range(64).shuffle(16).map(lambda x: x, num_parallel_calls=-1)
    g = lint.read_graph(ds.batch(8).prefetch(tf.data.AUTOTUNE))
    assert [s.label for s in g.stages] == [
        "source#0",
        "shuffle#1 (buffer=16)",
        "map#2 (parallel=AUTOTUNE)",
        "batch#3 (batch=8)",
        "prefetch#4 (buffer=AUTOTUNE)",
    ]
    assert g.output is g.stages[-1] and g.batch_size == 8
    assert [s.kind for s in g.measurable()] == [s.kind for s in g.stages]
    assert g.stages[1].is_random and not g.stages[2].is_random


def test_options_padded_batches_and_pass_through_stages():
    options = tf.data.Options()
    options.deterministic = False
    ds = tf.data.Dataset.range(10).map(lambda x: tf.fill([x % 3 + 1], x)).padded_batch(4)
    g = lint.read_graph(ds.take(2).with_options(options))
    assert g.deterministic_option is False
    batch = next(s for s in g.stages if s.kind == "batch")
    assert batch.padded and g.batch_size == 4
    kinds = [s.kind for s in g.stages]
    assert "take" in kinds and "options" in kinds
    assert "take" not in [s.kind for s in g.measurable()]
    assert "options" not in [s.kind for s in g.measurable()]


# ---- blocks of records split by a later unbatch (as tfperf's own reader yields them) --------
def test_only_stages_between_the_reader_and_the_unbatch_yield_blocks():
    graph = lint.read_graph(blocked_pipeline())
    kinds = [st.kind for st in graph.stages]
    reader, split = kinds.index("interleave"), kinds.index("unbatch")
    blocked = [st.index for st in graph.stages if graph.in_blocks(st)]
    # The reader and the maps on its blocks (unbatch adds one of its own); not the source
    # (scalars), the unbatch (examples) nor anything after the batch (batches).
    assert blocked == list(range(reader, split))
    assert kinds[split - 1] == "map"


def test_a_crop_box_drawn_at_random_makes_its_map_random():
    """sample_distorted_bounding_box's op names no 'Random': a crop box drawn per epoch is
    still augmentation (no cache after it, no multiset check across two runs)."""
    box = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])

    def crop(i: tf.Tensor) -> tf.Tensor:
        begin, _, _ = tf.image.sample_distorted_bounding_box([32, 32, 3], box, area_range=(0.3, 1))
        return begin + tf.cast(i, tf.int32)

    ds = tf.data.Dataset.range(8).map(crop).map(lambda b: b * 2)
    g = lint.read_graph(ds)
    assert g.stages[1].is_random and not g.stages[2].is_random
