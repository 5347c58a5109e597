"""The doctor's graph edits of any tf.data.Dataset (doctor/rewrites/io.py): parallel file
reads, parallel maps (numpy_function too) and batch, a shuffle buffer capped at the RAM
budget, a cache moved before a random augmentation. Each rewrite gives the same examples and
the rewritten graph shows the change. The cache_after_random finding: rules/test_cache.py;
the edits of the user's code: fix/test_pipeline_file.py."""

from __future__ import annotations

import numpy as np
import psutil
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.io import (
    cache_before_random,
    cap_shuffles,
    parallel_batch,
    parallel_maps,
    parallel_reads,
    random_before_cache,
)
from tfperf.measure import same_examples

AUTOTUNE = tf.data.AUTOTUNE


def _stage(ds, kind):
    return next(s for s in lint.read_graph(ds).stages if s.kind == kind)


@pytest.mark.parametrize(
    "make",
    [
        lambda files: tf.data.TFRecordDataset(files),  # a flat_map over the file list
        lambda files: tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, cycle_length=1
        ),
        lambda files: tf.data.Dataset.from_tensor_slices(files).interleave(
            tf.data.TFRecordDataset, cycle_length=1, num_parallel_calls=1
        ),
    ],
    ids=["tfrecord_file_list", "interleave_sequential", "interleave_cycle_1"],
)
def test_sequential_file_reads_become_a_parallel_interleave(record_files, make):
    ds = make(record_files).batch(10)
    out = parallel_reads(lint.read_graph(ds), ds)
    assert out is not None
    read = _stage(out, "interleave")
    assert read.op == "ParallelInterleaveDatasetV4"
    assert read.parallelism == lint.AUTOTUNE and read.deterministic == "false"
    assert same_examples(ds, out)
    # Already parallel: nothing to do.
    assert parallel_reads(lint.read_graph(out), out) is None


def test_numpy_function_map_made_parallel_and_replayed_by_name():
    def square(x):
        return np.square(x)

    ds = tf.data.Dataset.range(200).map(lambda x: tf.numpy_function(square, [x], tf.int64))
    assert _stage(ds, "map").parallelism is None
    out = parallel_maps(lint.read_graph(ds), ds)
    st = _stage(out, "map")
    assert st.op == "ParallelMapDatasetV2" and st.parallelism == lint.AUTOTUNE
    assert st.has_py_func
    assert same_examples(ds, out)
    again = tfperf.apply_rewrites(ds, ["parallel maps (also py_function)"])
    assert _stage(again, "map").op == "ParallelMapDatasetV2"


def test_batch_made_parallel():
    ds = tf.data.Dataset.range(203).map(lambda x: (x, tf.fill([3], x))).batch(16)
    out = parallel_batch(lint.read_graph(ds), ds)
    st = _stage(out, "batch")
    assert st.op == "ParallelBatchDataset" and st.parallelism == lint.AUTOTUNE
    assert st.batch_size == 16
    assert same_examples(ds, out)
    again = tfperf.apply_rewrites(ds, ["parallel batch"])
    assert _stage(again, "batch").op == "ParallelBatchDataset"


def test_shuffle_capped_at_the_budget_never_fills_the_huge_buffer():
    per = 256 * 1024  # bytes of one element: 64Ki float32
    # Endless: an uncapped buffer would grow until the machine runs out of memory.
    big = tf.data.Dataset.range(10**12).map(lambda i: tf.fill([per // 4], tf.cast(i, tf.float32)))
    ds = big.shuffle(200_000_000).batch(4)
    budget = 16 * 2**20
    rss = psutil.Process().memory_info().rss
    out, caps = cap_shuffles(lint.read_graph(ds), ds, budget)
    assert len(caps) == 1
    cap = caps[0]
    assert cap.requested == 200_000_000 and cap.element_bytes == per
    assert 1 <= cap.granted <= budget // per
    assert "200,000,000 ->" in str(cap) and f"{per:,} B" in str(cap)
    assert _stage(out, "shuffle").buffer_size == cap.granted
    batches = sum(1 for _ in out.take(100))  # 400 elements through the capped buffer
    grown = psutil.Process().memory_info().rss - rss
    assert batches == 100
    # The buffer holds ~16 MiB; the uncapped one would try to hold 200M x 256 KiB.
    assert grown < 200 * 2**20, f"RSS grew {grown / 2**20:.0f} MiB"


def _images():
    x = tf.reshape(tf.range(64 * 12, dtype=tf.float32), [64, 2, 6, 1])
    return tf.data.Dataset.from_tensor_slices(x)


def _flip(x):
    # Stateless, seeded: random ops in the graph, yet the same result every run (comparable).
    return tf.image.stateless_random_flip_left_right(x, seed=[1, 2])


def test_cache_after_random_map_moves_before_it():
    ds = _images().map(_flip).cache().batch(8)
    graph = lint.read_graph(ds)
    out = cache_before_random(graph, ds, 2**30)
    kinds = [s.kind for s in lint.read_graph(out).stages if s.kind != "options"]
    assert kinds.index("cache") < kinds.index("map")
    assert same_examples(ds, out)
    assert random_before_cache(lint.read_graph(out)) is None
    # Over the budget: not moved (the cache would outgrow the RAM).
    assert cache_before_random(graph, ds, 100) is None


# Run in a process of its own: in the suite's worker, threads that earlier tests left
# (abandoned probes, tf.data's pools) allocate while the buffer fills, and RSS counts them.
CAPPED_FILL = """
import psutil
import tensorflow as tf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.io import cap_shuffles

def pair(i):
    seed = tf.stack([i, tf.constant(7, tf.int64)])
    return tf.random.stateless_uniform([32], seed), tf.random.stateless_uniform([1], seed)

budget = 48 * 2**20
ds = tf.data.Dataset.range(10**9).map(pair).shuffle(10**9)
capped, caps = cap_shuffles(lint.read_graph(ds), ds, budget)
assert caps and caps[0].granted < 10**9
next(iter(tf.data.Dataset.range(8).map(pair).shuffle(4)))  # tf.data's own start-up
rss = psutil.Process().memory_info().rss
it = iter(capped)
next(it)  # fills the buffer
print(psutil.Process().memory_info().rss - rss, caps[0])
"""


def test_a_capped_shuffle_buffer_fits_its_budget_in_rss():
    # The buffer really filled (no budget would show in RSS otherwise): tensors and the
    # buffer's own bookkeeping both count, ~600 B per (float32[32], float32[1]) element.
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-c", CAPPED_FILL], capture_output=True, text=True, timeout=300
    )
    assert res.returncode == 0, res.stderr[-3000:]
    grown, cap = res.stdout.strip().splitlines()[-1].split(" ", 1)
    assert int(grown) <= 48 * 2**20 * 1.15, f"{cap}: RSS grew {int(grown) / 2**20:.0f} MiB"


def test_a_random_map_before_a_cache_is_found():
    flipped = _images().map(_flip)
    rand, cache = random_before_cache(lint.read_graph(flipped.cache().batch(8)))
    assert rand.kind == "map" and cache.kind == "cache" and rand.index < cache.index
    assert random_before_cache(lint.read_graph(_images().cache().map(_flip))) is None
    assert random_before_cache(lint.read_graph(flipped.batch(8))) is None  # no cache


def test_a_capped_shuffle_keeps_the_pipelines_options_and_parallelism():
    # Issue 19 saw a capped pipeline read at 0.73x; a cap that dropped the user's options or
    # a map's parallelism would explain it. The capped copy keeps every stage but the size.
    def parse(i):
        return tf.fill([4096], tf.cast(i, tf.float32))

    ds = tf.data.Dataset.range(4096).interleave(
        lambda i: tf.data.Dataset.range(i, i + 1), cycle_length=4, num_parallel_calls=AUTOTUNE
    )
    ds = ds.shuffle(100_000).map(parse, num_parallel_calls=AUTOTUNE).batch(8)
    options = tf.data.Options()
    options.deterministic = False
    options.experimental_slack = True
    ds = ds.prefetch(AUTOTUNE).with_options(options)
    out, caps = cap_shuffles(lint.read_graph(ds), ds, 4 * 2**20)
    assert caps and caps[0].granted < 100_000
    assert out.options().deterministic is False and out.options().experimental_slack is True
    before, after = lint.read_graph(ds).stages, lint.read_graph(out).stages
    assert [(s.kind, s.parallelism) for s in before] == [(s.kind, s.parallelism) for s in after]
    assert [s.buffer_size for s in after if s.kind == "shuffle"] == [caps[0].granted]
