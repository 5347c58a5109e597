"""Graph edits of a tf.data.Dataset that make its reads, maps and batch parallel, cap its
shuffle buffers at the RAM budget and move a cache that follows a random augmentation before
it. Each returns a new dataset (or None where it does not apply); the examples per epoch
stay the same multiset (fix/ checks that before a trial).

It times nothing: fix/ tries these and keeps those that help.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.data.pipeline_sizes import plan_shuffle_buffer
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import UnmeasuredBytes, mean_bytes

if TYPE_CHECKING:
    import tensorflow as tf

# Files read at once by a parallel interleave when the graph does not say how many there are.
MAX_CYCLE = 16
_SEQUENTIAL_READS = ("FlatMapDataset", "InterleaveDataset")


def _data_inputs(node: Any) -> tuple[list[str], list[str]]:
    """(data inputs, control inputs) of a node, each in order."""
    data = [i for i in node.input if not i.startswith("^")]
    return data, [i for i in node.input if i.startswith("^")]


def _const(graph_def: Any, name: str, value: int | bool) -> str:
    """Adds a scalar Const (int64, or bool) named `name` and returns its name."""
    import tensorflow as tf
    from tensorflow.core.framework import node_def_pb2

    dtype = tf.bool if isinstance(value, bool) else tf.int64
    node = node_def_pb2.NodeDef(name=name, op="Const")
    node.attr["dtype"].type = dtype.as_datatype_enum
    node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value, dtype))
    graph_def.node.append(node)
    return name


def _set_inputs(node: Any, data: list[str], control: list[str]) -> None:
    del node.input[:]
    node.input.extend(data + control)


def _nodes(graph_def: Any) -> dict[str, Any]:
    return {n.name: n for n in graph_def.node}


def _targuments(node: Any) -> int:
    return len(node.attr["Targuments"].list.type)


def _set_deterministic_false(node: Any) -> None:
    node.attr["deterministic"].s = b"false"  # training needs no order: no head-of-line waits


# ---- parallel file reads ------------------------------------------------------------------
def parallel_reads(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """Every sequential read of several files (the flat_map a TFRecordDataset over a list of
    files builds, an interleave without num_parallel_calls, a parallel interleave with
    cycle_length 1) becomes a parallel interleave: min(files, 16) files at once,
    num_parallel_calls AUTOTUNE, non-deterministic order."""
    g = copy.deepcopy(graph.graph_def)
    nodes = _nodes(g)
    changed = False
    for st in graph.stages:
        if not st.reads_files or st.kind not in ("flat_map", "interleave"):
            continue
        node = nodes[st.name]
        data, control = _data_inputs(node)
        n_args = _targuments(node)
        cycle = min(st.files, MAX_CYCLE) if st.files else lint.AUTOTUNE
        if node.op in _SEQUENTIAL_READS:
            head = data[: 1 + n_args]
            block = data[2 + n_args] if node.op == "InterleaveDataset" else None
        elif node.op == "ParallelInterleaveDatasetV4" and _cycle_is_one(nodes, node, n_args):
            head, block = data[: 1 + n_args], data[3 + n_args]
        else:
            continue
        pre = f"{node.name}/tfperf_parallel"
        block = block or _const(g, f"{pre}/block_length", 1)
        tail = [
            _const(g, f"{pre}/cycle_length", cycle),
            block,
            _const(g, f"{pre}/buffer_output_elements", lint.AUTOTUNE),
            _const(g, f"{pre}/prefetch_input_elements", lint.AUTOTUNE),
            _const(g, f"{pre}/num_parallel_calls", lint.AUTOTUNE),
        ]
        _set_inputs(node, head + tail, control)
        node.op = "ParallelInterleaveDatasetV4"
        _set_deterministic_false(node)
        changed = True
    return lint.rebuild(g, ds.element_spec) if changed else None


def _cycle_is_one(nodes: dict[str, Any], node: Any, n_args: int) -> bool:
    data, _ = _data_inputs(node)
    value = lint.const_value(nodes, data[1 + n_args])
    return value is not None and int(value) == 1


# ---- parallel maps and batch --------------------------------------------------------------
def _each_op(
    graph: lint.DatasetGraph, ds: tf.data.Dataset, op: str, edit: Any
) -> tf.data.Dataset | None:
    """`ds` with `edit(node, name of a new AUTOTUNE Const)` applied to every stage whose
    op is `op`, each made non-deterministic; None when there is none."""
    g = copy.deepcopy(graph.graph_def)
    nodes = _nodes(g)
    found = [nodes[st.name] for st in graph.stages if nodes[st.name].op == op]
    for node in found:
        calls = _const(g, f"{node.name}/tfperf_parallel/num_parallel_calls", lint.AUTOTUNE)
        edit(node, calls)
        _set_deterministic_false(node)
    return lint.rebuild(g, ds.element_spec) if found else None


def parallel_maps(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """Every sequential map becomes a parallel one (AUTOTUNE, non-deterministic order). Unlike
    tf.data's map_parallelization option this includes stateful functions: py_function and
    numpy_function maps (whether the GIL lets them gain is for the trial to measure)."""

    def edit(node: Any, calls: str) -> None:
        data, control = _data_inputs(node)
        _set_inputs(node, data[: 1 + _targuments(node)] + [calls], control)
        node.op = "ParallelMapDatasetV2"
        node.attr.pop("force_synchronous", None)  # MapDataset's only; V2 would refuse it

    return _each_op(graph, ds, "MapDataset", edit)


def parallel_batch(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """Every plain batch becomes a ParallelBatchDataset (copies into the batch on several
    threads, AUTOTUNE): what tf.data's parallel_batch option does, made explicit."""

    def edit(node: Any, calls: str) -> None:
        (source, size, drop), control = _data_inputs(node)
        _set_inputs(node, [source, size, calls, drop], control)
        node.op = "ParallelBatchDataset"

    return _each_op(graph, ds, "BatchDatasetV2", edit)


# ---- shuffle buffer within the RAM budget -------------------------------------------------
@dataclass
class ShuffleCap:
    """One shuffle buffer cut to the RAM budget, with the sizes that decided it."""

    stage: str  # the shuffle's label in the original graph
    requested: int  # elements
    granted: int
    element_bytes: int  # mean bytes of one buffered element (read from the input's first ones)
    budget: int  # bytes the buffer may hold

    def __str__(self) -> str:
        return (
            f"{self.stage}: {self.requested:,} -> {self.granted:,} elements of "
            f"~{self.element_bytes:,} B (budget {self.budget / 2**20:,.1f} MiB)"
        )


def cap_shuffles(
    graph: lint.DatasetGraph, ds: tf.data.Dataset, budget: int
) -> tuple[tf.data.Dataset, list[ShuffleCap]]:
    """`ds` with each shuffle buffer that would outgrow `budget` bytes cut to what fits (a
    new Const for its buffer_size input); the buffer is never filled to find out: the
    element size is read from the first elements of the stages before it, source first."""
    g = copy.deepcopy(graph.graph_def)
    work = lint.DatasetGraph(g, graph.stages, graph.element_spec, graph.deterministic_option)
    caps: list[ShuffleCap] = []
    for st in graph.stages:
        if st.kind != "shuffle" or st.index == 0 or not st.buffer_size or st.buffer_size < 0:
            continue
        try:
            per = mean_bytes(lint.prefix_dataset(work, graph.stages[st.index - 1]))
        except Exception:  # noqa: BLE001 - a prefix that cannot run alone: left as it is
            continue
        plan = plan_shuffle_buffer(st.buffer_size, per, budget / 2**20)
        if plan.granted >= plan.requested:
            continue
        granted = max(1, plan.granted)
        node = _nodes(g)[st.name]
        node.input[1] = _const(g, f"{st.name}/tfperf_capped_to_budget", granted)
        caps.append(ShuffleCap(st.label, st.buffer_size, granted, per, budget))
    if not caps:
        return ds, caps
    return lint.rebuild(g, ds.element_spec), caps


# ---- a cache placed after a random augmentation -------------------------------------------
def random_before_cache(graph: lint.DatasetGraph) -> tuple[lint.GraphStage, lint.GraphStage] | None:
    """(first random-content stage, the cache after it): the cache then replays the first
    epoch's augmented examples every epoch. Shuffles only reorder and are not counted."""
    first = None
    for st in graph.stages:
        if st.kind == "cache" and first is not None:
            return first, st
        if first is None and st.kind != "shuffle" and st.is_random:
            first = st
    return None


def cache_before_random(
    graph: lint.DatasetGraph, ds: tf.data.Dataset, budget: int
) -> tf.data.Dataset | None:
    """The cache of `map(augment).cache()` moved before the first random stage
    (`cache().map(augment)`): the augmentation runs again every epoch. Only when the cached
    elements (the stages before the random one, one epoch) fit `budget` bytes."""
    found = random_before_cache(graph)
    if found is None or found[0].index == 0:
        return None
    rand, cache = found
    before = graph.stages[rand.index - 1]
    n = lint.known_cardinality(lint.prefix_dataset(graph, before))
    if n is None:
        return None
    try:
        if n * mean_bytes(lint.prefix_dataset(graph, before)) > budget:
            return None
    except UnmeasuredBytes:
        return None  # its size in RAM is unknown: not moved
    g = copy.deepcopy(graph.graph_def)
    nodes = _nodes(g)
    cache_node, rand_node, prev = nodes[cache.name], nodes[rand.name], nodes[before.name]
    cache_input = cache_node.input[0]
    for n_ in g.node:  # the cache's consumers now read what the cache read
        if n_.input and n_.input[0].split(":")[0] == cache.name:
            n_.input[0] = cache_input
    cache_node.input[0] = rand_node.input[0]
    rand_node.input[0] = cache.name
    # The cache now holds the earlier stage's elements: its types and shapes.
    types = "output_types" if "output_types" in prev.attr else "Toutput_types"
    cache_node.attr["output_types"].list.CopyFrom(prev.attr[types].list)
    cache_node.attr["output_shapes"].CopyFrom(prev.attr["output_shapes"])
    return lint.rebuild(g, ds.element_spec)
