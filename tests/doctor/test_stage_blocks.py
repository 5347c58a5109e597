"""The doctor times every stage prefix per example: a stage that yields blocks of records
(read in blocks inside an interleave, split by a later unbatch, as tfperf's own reader does)
is split before it is batched, so a block is not counted as one example (the chess reader
showed as the slowest stage at 1,450 "examples"/s beside a pipeline of 129,355)."""

from __future__ import annotations

import tensorflow as tf

from tfperf.doctor.diagnosis.stages import stage_prefix
from tfperf.doctor.graph import lint

BLOCK, BATCH = 64, 32


def read_blocks(source: tf.Tensor) -> tf.data.Dataset:
    return tf.data.Dataset.range(256).batch(BLOCK)


def double(x: tf.Tensor) -> tf.Tensor:
    return x * 2


def blocked_pipeline() -> tf.data.Dataset:
    """Four sources of 256 values each, read in blocks of 64, split, batched by 32."""
    blocks = tf.data.Dataset.range(4).interleave(read_blocks, cycle_length=2, num_parallel_calls=2)
    return blocks.map(double).unbatch().batch(BATCH).map(double).prefetch(1)


def test_only_stages_between_the_reader_and_the_unbatch_yield_blocks():
    graph = lint.read_graph(blocked_pipeline())
    kinds = [st.kind for st in graph.stages]
    reader, split = kinds.index("interleave"), kinds.index("unbatch")
    blocked = [st.index for st in graph.stages if graph.in_blocks(st)]
    # The reader and the maps on its blocks (unbatch adds one of its own); not the source
    # (scalars), the unbatch (examples) nor anything after the batch (batches).
    assert blocked == list(range(reader, split))
    assert kinds[split - 1] == "map"


def test_a_stage_of_blocks_is_timed_per_example():
    graph = lint.read_graph(blocked_pipeline())
    reader = next(st for st in graph.stages if st.kind == "interleave")
    ds, per_batch = stage_prefix(graph, reader, BATCH)
    assert per_batch == BATCH
    assert ds.element_spec.shape.rank == 0  # single examples, not blocks of 64
    pulled = next(iter(ds.batch(per_batch)))
    assert pulled.shape == (BATCH,)  # one pull: 32 examples, as the full pipeline's batch
    last = graph.stages[-1]
    assert stage_prefix(graph, last, BATCH)[1] is None  # batches already
