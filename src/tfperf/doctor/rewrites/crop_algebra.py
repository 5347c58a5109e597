"""Integer arithmetic of a FunctionDef read as sums of atoms, for masked_crop.py to prove
a padded crop's shape the same for every example: tf.pad(patch, [[y, H - y - h], ..]) of
a patch of h rows has y + h + (H - y - h) = H rows, whatever y and h, though TensorFlow's
shape inference (which does no algebra) leaves it unknown. An atom is a tensor element the
algebra does not see into, keyed by (reference, element); equal keys are equal values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Linear = dict[Any, int]  # atom -> coefficient; "" -> the constant term


def _src(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def linear(
    by_name: dict[str, Any],
    ref: str,
    k: int | None,
    count: int | None = None,
    known: Callable[[str, int], Linear | None] = lambda name, k: None,
) -> Linear | None:
    """Element `k` (None: the scalar) of the integer tensor `ref` of a FunctionDef whose
    nodes are `by_name`, of `count` elements when known, as a sum; None when not an integer.
    `known(node, k)`: element k of a node's output when the caller knows it (else None)."""
    from tensorflow.python.framework import tensor_util

    name, _, rest = ref.partition(":")
    nd = by_name.get(name)
    at = int(rest.rsplit(":", 1)[-1]) if rest else 0
    atom: Linear = {(ref, k): 1}
    if nd is None:
        return atom  # a function argument
    op, ins = nd.op, [i for i in nd.input if not i.startswith("^")]

    def sub(i: int, k: int | None, count: int | None = count) -> Linear | None:
        return linear(by_name, ins[i], k, count, known)

    if op == "Const":
        value = tensor_util.MakeNdarray(nd.attr["value"].tensor)
        if value.dtype.kind not in "iu":
            return None
        flat = value.reshape(-1)
        at = 0 if value.ndim == 0 else k or 0  # a scalar broadcasts
        return {"": int(flat[at])} if at < flat.size else None
    if op in ("Identity", "Cast", "Reshape"):  # Reshape keeps the flat element order
        return sub(0, k)
    if op in ("AddV2", "Add", "Sub"):
        a, b = sub(0, k), sub(1, k)
        if a is None or b is None:
            return atom
        sign = -1 if op == "Sub" else 1
        return {x: a.get(x, 0) + sign * b.get(x, 0) for x in {*a, *b}}
    if op == "Neg":
        a = sub(0, k)
        return atom if a is None else {x: -c for x, c in a.items()}
    if op == "Pack" and nd.attr["axis"].i == 0 and k is not None:
        # Stacked pieces of `count` // n elements each (paddings: n pairs, or n scalars); a
        # wrong guess is caught by masked_crop's check of the shape at run time.
        inner = (count or len(ins)) // len(ins)
        if inner * len(ins) == (count or len(ins)):
            return sub(k // inner, None if inner == 1 else k % inner, inner)
    if op == "Unpack" and nd.attr["axis"].i == 0 and k is None:
        return sub(0, at, nd.attr["num"].i)
    if op == "StridedSlice" and k is None and nd.attr["shrink_axis_mask"].i == 1:
        begin = by_name.get(_src(ins[1]))  # v[i] of a vector v, i >= 0
        if begin is not None and begin.op == "Const":
            value = tensor_util.MakeNdarray(begin.attr["value"].tensor).reshape(-1)
            if value.size == 1 and value[0] >= 0:
                return sub(0, int(value[0]), None)
    if k is not None:
        return known(name, k) or atom
    return atom
