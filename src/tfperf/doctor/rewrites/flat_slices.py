"""A flat_map whose function returns `Dataset.from_tensor_slices(f(x))` (or `from_tensors`)
made a parallel map of `f` followed by an unbatch: the same elements in the same order, but
`f` (a packing loop, a window cut, a per-record split) runs on several cores instead of one
element after another, and no small dataset is built per element.

The function's graph is edited in the GraphDef: its TensorSliceDataset node is dropped and
the tensors it sliced become the function's outputs. It times nothing: fix/ checks the
examples and times the trial.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.graph.read import returned_source
from tfperf.doctor.rewrites.io import _const, _data_inputs, _nodes, _set_inputs
from tfperf.doctor.rewrites.splice import _ref_name, redirect

if TYPE_CHECKING:
    import tensorflow as tf


def _functions(graph_def: Any) -> dict[str, Any]:
    return {f.signature.name: f for f in graph_def.library.function}


def slice_flat_maps(graph: lint.DatasetGraph) -> list[lint.GraphStage]:
    """The pipeline's flat_maps whose function returns tensor slices (or one tensor)."""
    return [st for st in graph.stages if st.tensor_source is not None]


def _tensor_function(fn: Any, source: Any) -> Any:
    """A copy of `fn` returning the tensors `source` (its returned dataset) was built from,
    the dataset node and what only followed it (Identity, NoOp) dropped."""
    new = copy.deepcopy(fn)
    new.signature.name = f"{fn.signature.name}_tfperf_tensors"
    dropped = {source.name}
    grew = True
    while grew:  # every node reading a dropped one (the returned Identity, its NoOp)
        grew = False
        for n in new.node_def:
            if n.name not in dropped and any(_ref_name(i) in dropped for i in n.input):
                dropped.add(n.name)
                grew = True
    kept = [n for n in new.node_def if n.name not in dropped]
    del new.node_def[:]
    new.node_def.extend(kept)
    for name in [k for k, v in new.control_ret.items() if v in dropped]:
        del new.control_ret[name]
    del new.signature.control_output[:]
    new.signature.control_output.extend(new.control_ret.keys())
    types = list(source.attr["Toutput_types"].list.type)
    inputs = [i for i in source.input if not i.startswith("^")]
    del new.signature.output_arg[:]
    new.ret.clear()
    for k, (ref, dtype) in enumerate(zip(inputs, types, strict=True)):
        arg = new.signature.output_arg.add()
        arg.name, arg.type = f"tensor_{k}", dtype
        new.ret[arg.name] = ref
    return new


def _batched(shapes: Any) -> list[Any]:
    """Each element shape with a leading dimension of unknown size."""
    from tensorflow.core.framework import tensor_shape_pb2

    out = []
    for shape in shapes:
        proto = tensor_shape_pb2.TensorShapeProto()
        if not shape.unknown_rank:
            proto.dim.add(size=-1)
            proto.dim.extend(shape.dim)
        else:
            proto.unknown_rank = True
        out.append(proto)
    return out


def map_then_unbatch(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """`ds` with each flat_map of tensor slices made a parallel map (AUTOTUNE, order kept)
    of the tensors followed by an unbatch (a flat_map of one tensor: the map alone); None
    when there is none."""
    stages = slice_flat_maps(graph)
    if not stages:
        return None
    g = copy.deepcopy(graph.graph_def)
    fns = _functions(g)
    nodes = _nodes(g)
    for st in stages:
        node = nodes[st.name]
        fn = fns[node.attr["f"].func.name]
        source = returned_source(fn)
        assert source is not None  # slice_flat_maps picked it
        sliced = source.op == "TensorSliceDataset"
        tensors = _tensor_function(fn, source)
        g.library.function.append(tensors)
        element_shapes = list(node.attr["output_shapes"].list.shape)
        element_types = list(node.attr["output_types"].list.type)
        data, control = _data_inputs(node)
        calls = _const(g, f"{node.name}/tfperf_parallel/num_parallel_calls", lint.AUTOTUNE)
        _set_inputs(node, data + [calls], control)
        node.op = "ParallelMapDatasetV2"
        node.attr["f"].func.name = tensors.signature.name
        node.attr["use_inter_op_parallelism"].b = True
        node.attr["preserve_cardinality"].b = True
        node.attr["deterministic"].s = b"default"  # the flat_map's order, as the check needs
        if not sliced:
            continue  # from_tensors: one element per call, the map's own
        del node.attr["output_shapes"].list.shape[:]
        node.attr["output_shapes"].list.shape.extend(_batched(element_shapes))
        unbatch = g.node.add(name=f"{node.name}/tfperf_unbatch", op="UnbatchDataset")
        unbatch.input.append(node.name)
        unbatch.attr["output_types"].list.type.extend(element_types)
        unbatch.attr["output_shapes"].list.shape.extend(element_shapes)
        redirect(g, node.name, unbatch.name, skip=(unbatch.name,))
    return lint.rebuild(g, ds.element_spec)
