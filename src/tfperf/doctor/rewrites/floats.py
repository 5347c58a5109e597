"""float64 made float32 where it starts, not only at the output: the arrays a pipeline holds
as constants (from_tensor_slices, from_tensors, a captured NumPy array: float64 is what NumPy
and pandas give) cast once, and every float64 after them (dataset elements, map functions,
their constants) retyped to float32 in the graph, so each example is copied and computed at
half the bytes and the model receives float32 (what Keras casts to anyway).

A retyped pipeline computes in float32: the rewrite carries `doctor_check`, a comparison of
one pass of both in their sources' order (shuffles bypassed) with a float32 tolerance, which
fix/ runs before timing it; a pipeline whose values are random (augmentation) or computed in
Python (py_function, generators) is not retyped. Nothing is timed here.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.graph.read import PY_FUNC_OPS
from tfperf.doctor.rewrites import splice

if TYPE_CHECKING:
    import tensorflow as tf

# Elements of one pass compared by the check (the first ones, in the source's order).
CHECK_ELEMENTS = 256
RTOL, ATOL = 1e-4, 1e-6  # float32 keeps ~7 digits; a pipeline's few ops lose a few ulps
_PYTHON_DATASETS = ("GeneratorDataset",)


def _enums() -> tuple[int, int]:
    import tensorflow as tf

    return tf.float64.as_datatype_enum, tf.float32.as_datatype_enum


def _cast_tensor(tensor: Any) -> None:
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework import tensor_util

    value = tensor_util.MakeNdarray(tensor).astype(np.float32)
    tensor.CopyFrom(tf.make_tensor_proto(value, tf.float32))


def _retype_attr(value: Any, double: int, single: int) -> int:
    """One AttrValue with float64 made float32 (types, type lists, tensors, a function's
    attributes); how many it changed."""
    kind = value.WhichOneof("value")
    changed = 0
    if kind == "type" and value.type == double:
        value.type, changed = single, 1
    elif kind == "list":
        for i, t in enumerate(value.list.type):
            if t == double:
                value.list.type[i], changed = single, changed + 1
        for tensor in value.list.tensor:
            if tensor.dtype == double:
                _cast_tensor(tensor)
                changed += 1
    elif kind == "tensor" and value.tensor.dtype == double:
        _cast_tensor(value.tensor)
        changed = 1
    elif kind == "func":
        for inner in value.func.attr.values():
            changed += _retype_attr(inner, double, single)
    return changed


def retyped(graph_def: Any) -> tuple[Any, int]:
    """A copy of `graph_def` with every float64 made float32: its nodes' and functions'
    attributes and constants and the functions' signatures; and how many places changed."""
    double, single = _enums()
    g = copy.deepcopy(graph_def)
    changed = 0
    for node in g.node:
        for value in node.attr.values():
            changed += _retype_attr(value, double, single)
    for fdef in g.library.function:
        for arg in [*fdef.signature.input_arg, *fdef.signature.output_arg]:
            if arg.type == double:
                arg.type, changed = single, changed + 1
        for value in fdef.attr.values():
            changed += _retype_attr(value, double, single)
        for nd in fdef.node_def:
            for value in nd.attr.values():
                changed += _retype_attr(value, double, single)
    return g, changed


def _ops(graph_def: Any) -> set[str]:
    ops = {n.op for n in graph_def.node}
    for fdef in graph_def.library.function:
        ops |= {nd.op for nd in fdef.node_def}
    return ops


def _random_content(graph_def: Any) -> bool:
    """Values drawn at random anywhere in the graph (a shuffle only reorders)."""
    return any(
        ("Random" in op or op.startswith("Rng")) and op not in splice.SHUFFLE_OPS
        for op in _ops(graph_def)
    )


def float64_constants(graph_def: Any) -> int:
    """Elements of the float64 constants a pipeline holds (its source arrays, captured
    arrays; the functions' scalars too): 0 when there are none."""
    double, _ = _enums()
    total = 0
    consts = [n for n in graph_def.node if n.op == "Const"]
    consts += [nd for f in graph_def.library.function for nd in f.node_def if nd.op == "Const"]
    for node in consts:
        tensor = node.attr["value"].tensor
        if tensor.dtype != double:
            continue
        size = 1
        for d in tensor.tensor_shape.dim:
            size *= d.size
        total += size
    return total


def float32_spec(spec: Any) -> Any:
    """An element_spec with each float64 TensorSpec made float32."""
    import tensorflow as tf

    def one(s: Any) -> Any:
        if isinstance(s, tf.TensorSpec) and s.dtype == tf.float64:
            return tf.TensorSpec(s.shape, tf.float32, s.name)
        return s

    return tf.nest.map_structure(one, spec)


def close_values(a: Any, b: Any, limit: int = CHECK_ELEMENTS) -> bool:
    """One pass of `a` and `b` element by element (the first `limit`): the same structure
    and lengths, floats within float32's tolerance, everything else equal."""
    import numpy as np

    from tfperf.measure.examples import named_leaves, to_value

    ita, itb = iter(a), iter(b)
    for _ in range(limit):
        x, y = next(ita, None), next(itb, None)
        if x is None or y is None:
            return x is None and y is None
        xs, ys = named_leaves(x), named_leaves(y)
        if [n for n, _ in xs] != [n for n, _ in ys]:
            return False
        for (_, u), (_, v) in zip(xs, ys, strict=True):
            u, v = to_value(u), to_value(v)
            if isinstance(u, list) or isinstance(v, list):
                if u != v:
                    return False
            elif u.shape != v.shape:
                return False
            elif u.dtype.kind == "f":
                if not np.allclose(u.astype(np.float64), v.astype(np.float64), RTOL, ATOL):
                    return False
            elif not np.array_equal(u, v):
                return False
    return True


def float32_at_source(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """`ds` computed in float32 from its float64 constants on (module docstring); None when
    nothing in it is float64, or it computes values in Python or at random."""
    g0 = graph.graph_def
    ops = _ops(g0)
    if ops & PY_FUNC_OPS or any(op in ops for op in _PYTHON_DATASETS) or _random_content(g0):
        return None
    g, changed = retyped(g0)
    if not changed:
        return None
    if splice.has_shuffle_and_repeat(g0):
        return None  # its one pass cannot be taken in order
    out = splice.rebuild(g, float32_spec(ds.element_spec))
    old = lint.rebuild(splice.unshuffled(g0), ds.element_spec)
    new = lint.rebuild(splice.unshuffled(g), out.element_spec)
    out.doctor_check = lambda: close_values(old, new)
    values = float64_constants(g0)
    out.doctor_note = "float32 from the source on" + (
        f": {values:,} float64 constant values cast once" if values else ""
    )
    return out
