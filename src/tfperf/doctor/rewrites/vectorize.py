"""Vectorized rewrites of per-example maps: map(f).batch(n) becomes batch(n).map(F), F being f
vectorized over the batch by TensorFlow's own vectorizer (pfor, as in tf.vectorized_map); a
map pfor cannot convert stays per-example, made parallel, with the reason in a user's words.

It works on the dataset's graph (the user gives a Dataset, not code) and times nothing:
fix/ measures the result and checks it still yields the same examples.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.pfor_fn import Refused, Vectorized, vectorize_function

if TYPE_CHECKING:
    import tensorflow as tf

# Batches whose input may move: a padded batch pads per example, so it keeps its maps.
BATCH_OPS = frozenset({"BatchDataset", "BatchDatasetV2", "ParallelBatchDataset"})
# Stages a map commutes with: map(f).shuffle(b) yields what shuffle(b).map(f) does.
PASS_OPS = frozenset(
    {
        "ShuffleDataset",
        "ShuffleDatasetV2",
        "ShuffleDatasetV3",
        "PrefetchDataset",
        "OptionsDataset",
        "ModelDataset",
        "MaxIntraOpParallelismDataset",
        "PrivateThreadPoolDataset",
    }
)


@dataclass
class VectorizeResult:
    """The rewritten dataset (None: nothing changed), what was vectorized, and each map left
    per-example with the reason."""

    dataset: tf.data.Dataset | None
    done: list[str] = field(default_factory=list)
    fallbacks: list[tuple[str, str]] = field(default_factory=list)  # (stage label, reason)


def vectorize_maps(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> VectorizeResult:
    """Every chain of per-example maps right before a batch, vectorized after the batch as far
    as pfor converts them (from the batch backwards); the maps left before the batch are made
    parallel. `dataset` is None when nothing could change."""
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    result = VectorizeResult(None)
    changed = False
    for batch, chain in _chains(graph):
        lead = _lead(nodes, nodes[batch.name], batch)
        maps = [st for st in chain if st.kind == "map"]
        done: dict[str, Vectorized] = {}
        for st in reversed(maps):  # the batch moves back over each map pfor converts
            try:
                done[st.name] = vectorize_function(g, nodes, nodes[st.name], lead)
            except Refused as why:
                result.fallbacks.append((st.label, str(why)))
                break
        moved = [st for st in maps if st.name in done]
        # The batch now batches the elements before the first moved map: same shapes needed.
        while moved and not _batchable(done[moved[0].name]):
            reason = "its input elements can differ in shape, so they cannot be batched before it"
            result.fallbacks.append((moved[0].label, reason))
            done.pop(moved.pop(0).name)
        for st in [m for m in maps if m.name not in done]:
            if not any(label == st.label for label, _ in result.fallbacks):
                later = next(m for m in maps if m.index > st.index and m.name not in done)
                reason = f"it comes before {later.label}, which stays per-example"
                result.fallbacks.append((st.label, reason))
            changed |= _make_parallel(g, nodes[st.name])
        if moved:
            _move_batch(g, nodes, batch, chain, moved, done, lead)
            changed = True
            names = ", ".join(s.label for s in moved)
            result.done.append(f"{batch.label} before {names}, vectorized over the batch")
    if changed:
        result.dataset = lint.rebuild(g, ds.element_spec)
    return result


def refusal(graph: lint.DatasetGraph, stage: lint.GraphStage) -> Refused | None:
    """Why vectorize_maps would leave the per-example map `stage` per-example (None: it
    would vectorize it, or `stage` is in no chain of maps right before a batch). The same
    traces as vectorize_maps, from the batch backwards: pfor_fn remembers them."""
    for batch, chain in _chains(graph):
        maps = [st for st in chain if st.kind == "map"]
        if not any(st.name == stage.name for st in maps):
            continue
        nodes = {n.name: n for n in graph.graph_def.node}
        lead = _lead(nodes, nodes[batch.name], batch)
        for st in reversed(maps):
            try:
                vectorize_function(graph.graph_def, nodes, nodes[st.name], lead)
            except Refused as why:
                if st.name == stage.name:
                    return why
                later = f"it comes before {st.label}, which stays per-example: {why}"
                return Refused(later, why.per_element)
            if st.name == stage.name:
                return None
    return None


def _chains(graph: lint.DatasetGraph) -> list[tuple[lint.GraphStage, list[lint.GraphStage]]]:
    """(batch, the stages from the first per-example map right before it), for each batch
    that has some: maps, and stages a map commutes with (shuffle, prefetch, options)."""
    out = []
    for i, st in enumerate(graph.stages):
        if st.op not in BATCH_OPS:
            continue
        j = i
        # A filter, take, flat_map or repeat changes the count: the chain stops there.
        while (
            j > 0
            and not graph.stages[j - 1].batched
            and (graph.stages[j - 1].kind == "map" or graph.stages[j - 1].op in PASS_OPS)
        ):
            j -= 1
        chain = graph.stages[j:i]
        first = next((k for k, s in enumerate(chain) if s.kind == "map"), None)
        if first is not None:
            out.append((st, chain[first:]))
    return out


def _data_inputs(node: Any) -> list[str]:
    return [i for i in node.input if not i.startswith("^")]


def _lead(nodes: dict[str, Any], batch_node: Any, batch: lint.GraphStage) -> int:
    """The batch dimension of the batch's output: n with drop_remainder, else unknown (-1)."""
    ins = _data_inputs(batch_node)
    drop = lint.const_value(nodes, ins[-1]) if batch_node.op != "BatchDataset" else None
    return batch.batch_size if drop is not None and bool(drop) and batch.batch_size else -1


# ---- the graph edits ----------------------------------------------------------------------
def _batchable(vec: Vectorized) -> bool:
    """True when the elements entering the map have one fixed shape (batch() needs it)."""
    return all(not s.unknown_rank and all(d.size >= 0 for d in s.dim) for s in vec.in_shapes)


def _set_shapes(shapes: Any, lead: int | None, out: Any) -> None:
    """`out` (a list-of-shapes attr) set to `shapes`, with a batch dimension `lead` in front
    unless it is None."""
    shapes = [copy.deepcopy(s) for s in shapes]
    del out.list.shape[:]
    for shape in shapes:
        new = out.list.shape.add()
        if shape.unknown_rank:
            new.unknown_rank = True
            continue
        if lead is not None:
            new.dim.add().size = lead
        new.dim.extend(shape.dim)


def _set_element(node: Any, vec: Vectorized, lead: int | None) -> None:
    """The node's output declared as what entered `vec`'s map (batched by `lead`)."""
    del node.attr["output_types"].list.type[:]
    node.attr["output_types"].list.type.extend(vec.in_types)
    _set_shapes(vec.in_shapes, lead, node.attr["output_shapes"])


def _move_batch(
    g: Any,
    nodes: dict[str, Any],
    batch: lint.GraphStage,
    chain: list[lint.GraphStage],
    moved: list[lint.GraphStage],
    done: dict[str, Vectorized],
    lead: int,
) -> None:
    """src -> (chain) -> batch -> rest becomes src -> (chain without the moved maps) ->
    batch -> F1 .. Fk -> rest, Fi being the moved maps, vectorized."""
    have = {f.signature.name for f in g.library.function}
    for vec in done.values():
        for fdef in vec.fdefs:
            if fdef.signature.name not in have:
                g.library.function.add().CopyFrom(fdef)
                have.add(fdef.signature.name)
    for n in g.node:  # whoever read the batch now reads the last vectorized map
        for i, ref in enumerate(n.input):
            if ref.split(":")[0] == batch.name:
                n.input[i] = moved[-1].name
    first = done[moved[0].name]  # what entered the first moved map
    stay = [s for s in chain if s.name not in done]
    order = [nodes[s.name] for s in stay] + [nodes[batch.name]] + [nodes[s.name] for s in moved]
    prev = nodes[chain[0].name].input[0]
    for node in order:  # one chain again, in the new order
        node.input[0], prev = prev, node.name
    for st in stay:  # the stages the moved maps came after now pass on their input
        if st.index > moved[0].index:
            _set_element(nodes[st.name], first, None)
    _set_element(nodes[batch.name], first, lead)
    for st in moved:
        node = nodes[st.name]
        node.attr["f"].func.name = done[st.name].name
        node.attr["f"].func.attr.clear()
        _set_shapes(node.attr["output_shapes"].list.shape, lead, node.attr["output_shapes"])


def _make_parallel(g: Any, node: Any) -> bool:
    """A sequential map node turned into a parallel one (AUTOTUNE, order kept)."""
    import tensorflow as tf

    if node.op != "MapDataset":
        return False
    const = g.node.add()
    const.name = f"{node.name}/num_parallel_calls"
    const.op = "Const"
    const.attr["dtype"].type = tf.int64.as_datatype_enum
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(lint.AUTOTUNE, tf.int64))
    control = [i for i in node.input if i.startswith("^")]
    data = _data_inputs(node)
    del node.input[:]
    node.input.extend([*data, const.name, *control])
    node.op = "ParallelMapDatasetV2"
    if "force_synchronous" in node.attr:
        del node.attr["force_synchronous"]
    node.attr["deterministic"].s = b"default"
    return True
