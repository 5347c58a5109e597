"""Graph surgery the source rewrites share (gather.py, csv.py): a dataset built in Python
copied into a user's GraphDef under a prefix, consumers pointed at another node, a node's
declared element retyped, the nodes the output no longer reads dropped; any node of a
GraphDef run as a dataset of its own, and a GraphDef without its shuffles (one pass in
order, for the multiset check of a rewrite on a shuffled pipeline).

It times nothing and checks nothing: the rewrites use it, fix/ checks what they return.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint

if TYPE_CHECKING:
    import tensorflow as tf

SHUFFLE_OPS = frozenset({"ShuffleDataset", "ShuffleDatasetV2", "ShuffleDatasetV3"})


def _ref_name(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def serialized(ds: tf.data.Dataset) -> Any:
    """The GraphDef of `ds` (py_functions as tokens, as read.py reads it)."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    g = graph_pb2.GraphDef()
    g.ParseFromString(ds._as_serialized_graph(external_state_policy=policy).numpy())
    return g


def import_dataset(g: Any, ds: tf.data.Dataset, prefix: str) -> dict[str, Any]:
    """Copies every node of `ds`'s graph into `g` (names and inputs prefixed, `_Retval`
    left out) and the functions `g` lacks; returns the copies by their op, a list each
    in graph order (e.g. out["ParallelMapDatasetV2"][0])."""
    src = serialized(ds)
    have = {f.signature.name for f in g.library.function}
    for fdef in src.library.function:
        if fdef.signature.name not in have:
            g.library.function.add().CopyFrom(fdef)
            have.add(fdef.signature.name)
    by_op: dict[str, Any] = {}
    for node in src.node:
        if node.op == "_Retval":
            continue
        new = g.node.add()
        new.CopyFrom(node)
        new.name = f"{prefix}/{node.name}"
        del new.input[:]
        for ref in node.input:
            control = "^" if ref.startswith("^") else ""
            new.input.append(f"{control}{prefix}/{ref.lstrip('^')}")
        by_op.setdefault(node.op, []).append(new)
    return by_op


def redirect(g: Any, old: str, new: str, *, skip: tuple[str, ...] = ()) -> None:
    """Every node reading `old`'s first output (its data input) reads `new` instead."""
    for node in g.node:
        if node.name in skip or node.name == new:
            continue
        for i, ref in enumerate(node.input):
            if not ref.startswith("^") and _ref_name(ref) == old:
                node.input[i] = new


def retype(node: Any, types: list[int], shapes: list[Any]) -> None:
    """`node`'s declared element: DataType enums and TensorShapeProtos."""
    key = "output_types" if "output_types" in node.attr else "Toutput_types"
    del node.attr[key].list.type[:]
    node.attr[key].list.type.extend(types)
    del node.attr["output_shapes"].list.shape[:]
    for s in shapes:
        node.attr["output_shapes"].list.shape.add().CopyFrom(s)


def scalar_shape(*dims: int) -> Any:
    """A TensorShapeProto with these dimensions (-1: unknown)."""
    from tensorflow.core.framework import tensor_shape_pb2

    proto = tensor_shape_pb2.TensorShapeProto()
    for d in dims:
        proto.dim.add().size = d
    return proto


def prune(g: Any) -> None:
    """Drops the nodes the output (`_Retval`) does not read, directly or not."""
    nodes = {n.name: n for n in g.node}
    todo = [n.name for n in g.node if n.op == "_Retval"]
    keep: set[str] = set()
    while todo:
        name = todo.pop()
        if name in keep or name not in nodes:
            continue
        keep.add(name)
        todo.extend(_ref_name(r) for r in nodes[name].input)
    kept = [copy.deepcopy(n) for n in g.node if n.name in keep]
    del g.node[:]
    g.node.extend(kept)


def node_dataset(g: Any, name: str) -> tf.data.Dataset:
    """The dataset node `name` of GraphDef `g` yields, as a dataset of flat tuples."""
    import tensorflow as tf

    g = copy.deepcopy(g)
    node = next(n for n in g.node if n.name == name)
    for n in g.node:
        if n.op == "_Retval":
            n.input[0] = name
    prune(g)
    types = "output_types" if "output_types" in node.attr else "Toutput_types"
    specs = tuple(
        tf.TensorSpec(tf.TensorShape(s), tf.dtypes.as_dtype(t))
        for s, t in zip(
            node.attr["output_shapes"].list.shape, node.attr[types].list.type, strict=True
        )
    )
    variant = tf.raw_ops.DatasetFromGraph(graph_def=g.SerializeToString())
    return tf.data.experimental.from_variant(variant, specs[0] if len(specs) == 1 else specs)


def unshuffled(g: Any) -> Any:
    """A copy of GraphDef `g` with every shuffle bypassed (its consumers read its input):
    one pass in the order of the source, for comparing two pipelines that differ only in
    where they shuffle."""
    g = copy.deepcopy(g)
    for node in [n for n in g.node if n.op in SHUFFLE_OPS]:
        redirect(g, node.name, node.input[0])
    prune(g)
    return g


def const_array(nodes: dict[str, Any], ref: str) -> Any:
    """The value of a Const node as numpy (any dtype and encoding: string tensors stored as
    raw bytes too, which tensor_util's reader refuses); None when `ref` is no Const."""
    import numpy as np
    import tensorflow as tf

    node = nodes.get(ref.split(":")[0].lstrip("^"))
    if node is None or node.op != "Const":
        return None
    proto = node.attr["value"].tensor
    value = tf.io.parse_tensor(proto.SerializeToString(), tf.dtypes.as_dtype(proto.dtype))
    return np.asarray(value.numpy())  # a scalar string comes back as bytes


def has_shuffle_and_repeat(g: Any) -> bool:
    """A fused shuffle-and-repeat: bypassing it would drop its repeat too."""
    return any(n.op.startswith("ShuffleAndRepeat") for n in g.node)


def rebuild(g: Any, element_spec: Any) -> tf.data.Dataset:
    """The dataset of GraphDef `g` (pruned first), declared as `element_spec`."""
    prune(g)
    return lint.rebuild(g, element_spec)
