"""Edits of a tf.data.Dataset for the doctor: rewrites of its graph (batch before a
batch-polymorphic map, determinism) or of its options and tail (map parallelization,
prefetch, float32; the cache: cache.py). The check that a rewrite still yields the
same examples is tfperf.measure.examples' (`same_examples`, re-exported here).

It times nothing and decides nothing: diagnosis/ measures what a rewrite would give,
fix/ tries them and keeps those that help.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.pfor_fn import PER_ELEMENT_OPS

# The multiset check is tfperf.measure.examples' (tfperf.testing uses the same one); the
# doctor's modules import it from here.
from tfperf.measure.examples import example_multiset as example_multiset
from tfperf.measure.examples import same_examples as same_examples

if TYPE_CHECKING:
    import tensorflow as tf


# ---- rewrites -----------------------------------------------------------------------------
def set_deterministic(
    graph: lint.DatasetGraph, ds: tf.data.Dataset, value: bool
) -> tf.data.Dataset:
    """`ds` with every op's `deterministic` attribute and the dataset option set to `value`."""
    import tensorflow as tf

    g = copy.deepcopy(graph.graph_def)
    for node in g.node:
        if "deterministic" in node.attr:
            node.attr["deterministic"].s = b"true" if value else b"false"
    out = lint.rebuild(g, ds.element_spec)
    opts = tf.data.Options()
    opts.deterministic = value
    return out.with_options(opts)


def batch_before_map(
    graph: lint.DatasetGraph, ds: tf.data.Dataset
) -> tuple[tf.data.Dataset, str] | None:
    """Moves the per-example map right before the first batch after it (map(f).batch(n)
    becomes batch(n).map(f)); the caller checks that f gave the same examples on a batch."""
    stages = graph.stages
    for i, st in enumerate(stages[:-1]):
        nxt = stages[i + 1]
        # A padded_batch pads the map's output (its padded shapes are the map's): it keeps
        # its map before it.
        movable = nxt.kind == "batch" and not nxt.padded
        # A file read or image decode takes one element only: that map stays; a later one
        # (e.g. an augmentation after unbatch) may move.
        one_only = bool(st.fn_ops & PER_ELEMENT_OPS) or st.has_py_func
        if st.kind == "map" and not st.batched and movable and not one_only:
            if i > 0 and _stacks(stages[i - 1]) and not st.composite:
                break
    else:
        return None
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    map_node, batch_node = nodes[st.name], nodes[nxt.name]
    source = map_node.input[0]
    consumers = [n for n in g.node if n.input and n.input[0].split(":")[0] == batch_node.name]
    src_node = nodes[source.split(":")[0]]
    src_types = "output_types" if "output_types" in src_node.attr else "Toutput_types"
    drop = lint.const_value(nodes, batch_node.input[-1])
    lead = nxt.batch_size if drop is not None and bool(drop) and nxt.batch_size else -1
    batch_shapes = copy.deepcopy(batch_node.attr["output_shapes"])  # = map's batched output
    # The batch now batches the source's elements: its dtypes and shapes with a batch dim.
    del batch_node.attr["output_types"].list.type[:]
    batch_node.attr["output_types"].list.type.extend(src_node.attr[src_types].list.type)
    del batch_node.attr["output_shapes"].list.shape[:]
    for shape in src_node.attr["output_shapes"].list.shape:
        new = batch_node.attr["output_shapes"].list.shape.add()
        if shape.unknown_rank:
            new.unknown_rank = True
            continue
        new.dim.add().size = lead
        for d in shape.dim:
            new.dim.add().size = d.size
    batch_node.input[0] = source
    map_node.input[0] = batch_node.name
    map_node.attr["output_shapes"].CopyFrom(batch_shapes)
    for c in consumers:
        c.input[0] = map_node.name
    return lint.rebuild(g, ds.element_spec), f"batch before {st.label} (vectorized)"


def _stacks(st: lint.GraphStage) -> bool:
    """Whether a dense batch can stack `st`'s elements: every shape known (a dimension the
    graph leaves open varies, e.g. sequences before a padded_batch), no ragged or sparse
    component (a map written for one example does not read a batch's encoding of them)."""
    if st.composite:
        return False
    return all(s is not None and None not in s for s in st.output_shapes)


def with_options(ds: tf.data.Dataset, **flags: bool) -> tf.data.Dataset:
    """`ds` with tf.data's map parallelization and/or autotuning switched on."""
    import tensorflow as tf

    opts = tf.data.Options()
    if flags.get("map_parallelization"):
        opts.experimental_optimization.map_parallelization = True
    if flags.get("autotune"):
        opts.autotune.enabled = True
    return ds.with_options(opts)


def to_float32(*element: Any) -> Any:
    """A map function: the element with every float64 tensor cast to float32."""
    import tensorflow as tf

    def cast(t: Any) -> Any:
        return tf.cast(t, tf.float32) if t.dtype == tf.float64 else t

    return tf.nest.map_structure(cast, element if len(element) > 1 else element[0])
