"""The doctor's static lint of a tf.data pipeline: the chain of stages read from the dataset's
graph (read.py, its names re-exported here as the doctor's one entry to it) and the
questions asked of it: a prefix rebuilt as a dataset of its own, the deterministic
(cacheable) prefix, float64 outputs, order-keeping parallel stages, the known cardinality.

It times nothing and judges nothing: diagnosis/ times the prefixes, rules/ decide.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph.read import (
    AUTOTUNE,
    DatasetGraph,
    GraphStage,
    const_value,
    read_graph,
)

if TYPE_CHECKING:
    import tensorflow as tf

__all__ = [
    "AUTOTUNE",
    "DatasetGraph",
    "GraphStage",
    "const_value",
    "deterministic_prefix",
    "deterministic_stages",
    "float64_outputs",
    "infinite",
    "known_cardinality",
    "maps_before",
    "prefix_dataset",
    "read_graph",
    "rebuild",
]


def prefix_dataset(graph: DatasetGraph, stage: GraphStage) -> tf.data.Dataset:
    """The pipeline cut after `stage`, rebuilt from the graph as a dataset of flat tuples
    (with its own structure when it holds ragged or sparse tensors whose spec is known: as
    flat tuples they would be opaque variants)."""
    import tensorflow as tf

    g = copy.deepcopy(graph.graph_def)
    node = next(n for n in g.node if n.name == stage.name)
    for n in g.node:
        if n.op == "_Retval":
            n.input[0] = stage.name
    if stage.composite and stage.element_spec is not None:
        return rebuild(g, stage.element_spec)
    types = "output_types" if "output_types" in node.attr else "Toutput_types"
    specs = tuple(
        tf.TensorSpec(tf.TensorShape(s), tf.dtypes.as_dtype(t))
        for s, t in zip(
            node.attr["output_shapes"].list.shape, node.attr[types].list.type, strict=True
        )
    )
    variant = tf.raw_ops.DatasetFromGraph(graph_def=g.SerializeToString())
    return tf.data.experimental.from_variant(variant, specs[0] if len(specs) == 1 else specs)


def deterministic_prefix(graph: DatasetGraph) -> list[GraphStage]:
    """Stages before the first that shuffles, randomizes content or repeats: cacheable."""
    out = []
    for st in graph.stages:
        if st.is_random or st.kind in ("repeat", "cache", "prefetch") or st.has_py_func:
            break
        out.append(st)
    return out


def maps_before(graph: DatasetGraph, shuffle: GraphStage) -> list[GraphStage]:
    """The maps right before `shuffle` that it could come before with the same orders: each
    one element in, one out (a map, not a filter or a batch), with no random numbers. A
    shuffle of their inputs then gives the same random permutations of the same examples."""
    out: list[GraphStage] = []
    for st in reversed(graph.stages[: shuffle.index]):
        if st.kind != "map" or st.batched or st.is_random or st.is_generator or st.index == 0:
            break
        out.insert(0, st)
    return out


def float64_outputs(graph: DatasetGraph) -> list[str]:
    """Paths of float64 tensors in the dataset's output."""
    import tensorflow as tf

    found = []
    for path, spec in _flat_specs(graph.element_spec):
        if getattr(spec, "dtype", None) == tf.float64:
            found.append(path)
    return found


def _flat_specs(spec: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(spec, dict):
        return [p for k, v in spec.items() for p in _flat_specs(v, f"{path}/{k}" if path else k)]
    if isinstance(spec, (tuple, list)):
        names = ("features", "labels", "weights") if len(spec) <= 3 and not path else None
        return [
            p
            for i, v in enumerate(spec)
            for p in _flat_specs(v, (names[i] if names else f"{path}[{i}]"))
        ]
    return [(path or "element", spec)]


def rebuild(graph_def: Any, element_spec: Any) -> tf.data.Dataset:
    """A dataset from a (possibly rewritten) GraphDef whose output matches `element_spec`."""
    import tensorflow as tf

    variant = tf.raw_ops.DatasetFromGraph(graph_def=graph_def.SerializeToString())
    return tf.data.experimental.from_variant(variant, element_spec)


def deterministic_stages(graph: DatasetGraph) -> list[GraphStage]:
    """Parallel stages that keep input order although training does not need it."""
    out = []
    for st in graph.stages:
        if not st.parallel and st.kind not in ("interleave",):
            continue
        if st.kind == "interleave" and st.parallelism is None:
            continue
        if st.deterministic == "true" or (
            st.deterministic in (None, "default") and graph.deterministic_option is not False
        ):
            out.append(st)
    return out


def infinite(ds: tf.data.Dataset) -> bool:
    """One pass never ends (a repeat without a count): tf.data knows it without reading."""
    import tensorflow as tf

    return int(tf.data.experimental.cardinality(ds)) == tf.data.INFINITE_CARDINALITY


def known_cardinality(ds: tf.data.Dataset) -> int | None:
    """Elements per pass, when tf.data knows it without reading (None: unknown/infinite)."""
    import tensorflow as tf

    n = int(tf.data.experimental.cardinality(ds))
    return n if n >= 0 else None
