"""A shuffle placed after a costly decode moved before it: `files.map(decode).shuffle(n)`
becomes `files.shuffle(n).map(decode)`. The maps it crosses take one element and give one,
with no random numbers (lint.maps_before), so every order is as likely as before and each
pass holds the same examples; the buffer then holds file names, indices or records instead
of decoded examples (a RAM change, verified by the multiset check of one pass each).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.splice import redirect

if TYPE_CHECKING:
    import tensorflow as tf

CHECKED = 1_000  # source elements whose examples the multiset check compares, both ways


def early_site(graph: lint.DatasetGraph) -> tuple[lint.GraphStage, lint.GraphStage] | None:
    """(the first shuffle with maps it can move before, the first of those maps)."""
    for st in graph.stages:
        if st.kind == "shuffle":
            maps = lint.maps_before(graph, st)
            if maps:
                return st, maps[0]
    return None


def _take_at_source(graph_def: Any, source: str, count: int) -> Any:
    """A copy of `graph_def` that reads only the first `count` elements of node `source`."""
    import tensorflow as tf
    from tensorflow.core.framework import node_def_pb2

    g = copy.deepcopy(graph_def)
    src = next(n for n in g.node if n.name == source)
    const = node_def_pb2.NodeDef(name=f"{source}/tfperf_check_count", op="Const")
    const.attr["dtype"].type = tf.int64.as_datatype_enum
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(count, tf.int64))
    take = node_def_pb2.NodeDef(name=f"{source}/tfperf_check_take", op="TakeDataset")
    take.input.extend([source, const.name])
    types = "output_types" if "output_types" in src.attr else "Toutput_types"
    take.attr["output_types"].list.CopyFrom(src.attr[types].list)
    take.attr["output_shapes"].CopyFrom(src.attr["output_shapes"])
    g.node.extend([const, take])
    redirect(g, source, take.name, skip=(take.name,))
    return g


def shuffle_before_maps(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """`ds` with its first movable shuffle before the maps it follows (None: none moves).
    The rewritten dataset carries `doctor_check`: both pipelines on the first CHECKED source
    elements, whose one pass --fix compares as multisets (shuffled, they cannot be compared
    element by element)."""
    site = early_site(graph)
    if site is None:
        return None
    shuffle, first = site
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    shuffle_node, first_node = nodes[shuffle.name], nodes[first.name]
    prev = nodes[graph.stages[first.index - 1].name]
    for n in g.node:  # the shuffle's consumers now read what the shuffle read
        if n is not shuffle_node and n.input and n.input[0].split(":")[0] == shuffle.name:
            n.input[0] = shuffle_node.input[0]
    shuffle_node.input[0] = first_node.input[0]
    first_node.input[0] = shuffle.name
    # The shuffle now holds the earlier stage's elements: its types and shapes.
    types = "output_types" if "output_types" in prev.attr else "Toutput_types"
    shuffle_node.attr["output_types"].list.CopyFrom(prev.attr[types].list)
    shuffle_node.attr["output_shapes"].CopyFrom(prev.attr["output_shapes"])
    out = lint.rebuild(g, ds.element_spec).with_options(ds.options())
    source = graph.stages[0].name
    old = lint.rebuild(_take_at_source(graph.graph_def, source, CHECKED), ds.element_spec)
    new = lint.rebuild(_take_at_source(g, source, CHECKED), ds.element_spec)
    out.doctor_check = (old, new)
    return out
