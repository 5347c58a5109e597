"""Crops padded back to a fixed shape, rewritten so that TensorFlow's vectorizer (pfor) can
batch them: a `Slice` whose size or offset differs per example (a cutout, a CutMix patch)
has a per-example shape, which pfor refuses; when its output only flows (through Identity,
Squeeze, ExpandDims) into a `Pad`/`PadV2` whose output shape is the same for every example,
the pair is the masked gather below, which pfor converts. Per padded axis:
`idx = range(out_dim) - pad_before + begin`, `valid = (range >= pad_before) &
(range < pad_before + size)`, a gather along the axis at the clipped idx, and at the end
`where(all valid, gathered, pad_value)`. The same values, example by example.

It edits the map's FunctionDef before pfor traces it: the Pad node becomes an Identity of
the masked form (its nodes inlined, prefixed), each Shape of the crop an Identity of the
crop's size; the Slice is then left unread. A crop with no pad to a static shape is left as
it is (pfor refuses it, and says why).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from tfperf.doctor.rewrites.crop_algebra import Linear, linear

# Ops between the crop and its pad that keep the values: an axis list per op (see _tags).
_PASS = frozenset({"Identity", "Squeeze", "ExpandDims"})
_PADS = frozenset({"Pad", "PadV2"})
Tags = list[int | None]  # per axis: the Slice axis it comes from, None for a new axis of 1
Plan = tuple[list[str], dict[int, int]]  # see _plan


@dataclass
class _Site:
    """One Slice, the chain of nodes from it to its pads, and the Shape nodes that read it."""

    slice_node: Any
    rank: int
    pads: list[tuple[Any, Tags]] = field(default_factory=list)  # (Pad node, its input's tags)
    shapes: list[tuple[Any, Tags]] = field(default_factory=list)
    chain: list[Any] = field(default_factory=list)


def rewrite_library(lib: Any, name: str, output_shapes: Any) -> Any:
    """`lib` (a FunctionDefLibrary) with the crops-then-pads of the function `name` and of
    those it calls rewritten as masked gathers; `output_shapes` (the map node's attr) are
    `name`'s declared output shapes. `lib` itself when there is none to rewrite."""
    out = copy.deepcopy(lib)
    changed = False
    for fdef in out.function:
        shapes = output_shapes.list.shape if fdef.signature.name == name else []
        changed |= _rewrite(fdef, [_dims(s) for s in shapes])
    return out if changed else lib


def _rewrite(fdef: Any, declared: list[Any]) -> bool:
    """`fdef`'s crops-then-pads rewritten in place; False when there is none."""
    changed = False
    for site in _sites(fdef):
        if _all_const(fdef, site):
            continue  # pfor slices and pads a crop of a fixed size and place itself
        outs = [
            _pad_shape(fdef, pad, len(tags), declared) or _proved_shape(fdef, site, pad, tags)
            for pad, tags in site.pads
        ]
        if any(o is None for o in outs):
            continue  # some pad's shape differs per example: a ragged result
        _replace(fdef, site, outs)
        changed = True
    return changed


def _dims(proto: Any) -> list[int] | None:
    return None if proto.unknown_rank else [d.size for d in proto.dim]


def _src(ref: str) -> str:
    return ref.lstrip("^").split(":")[0]


def _consumers(fdef: Any) -> dict[str, list[Any]]:
    """Per node name, the nodes reading one of its outputs as data."""
    out: dict[str, list[Any]] = {}
    for nd in fdef.node_def:
        for ref in nd.input:
            if not ref.startswith("^"):
                out.setdefault(_src(ref), []).append(nd)
    return out


def _const(fdef: Any, ref: str) -> Any:
    """The value of the Const node `ref` reads, or None."""
    from tensorflow.python.framework import tensor_util

    nd = next((n for n in fdef.node_def if n.name == _src(ref)), None)
    return tensor_util.MakeNdarray(nd.attr["value"].tensor) if nd and nd.op == "Const" else None


def _tags(fdef: Any, nd: Any, tags: Tags) -> Tags | None:
    """The axes of `nd`'s output given its input's (None: not known statically)."""
    if nd.op == "Identity":
        return tags
    if nd.op == "Squeeze":
        dims = [d % len(tags) for d in nd.attr["squeeze_dims"].list.i]
        return [t for i, t in enumerate(tags) if i not in dims] if dims else None
    dim = _const(fdef, nd.input[1])  # ExpandDims
    if dim is None or dim.size != 1:
        return None
    at = int(dim.reshape(())) % (len(tags) + 1)
    return [*tags[:at], None, *tags[at:]]


def _sites(fdef: Any) -> list[_Site]:
    """Every Slice whose output is only read (through _PASS ops) by pads and Shape nodes,
    with at least one pad; data reaching the function's outputs or any other op: none."""
    readers = _consumers(fdef)
    returned = {_src(ref) for ref in fdef.ret.values()}
    out = []
    for nd in fdef.node_def:
        if nd.op != "Slice":
            continue
        rank = _rank(fdef, nd)
        if rank is None:
            continue
        site = _Site(nd, rank)
        todo: list[tuple[Any, Tags]] = [(nd, list(range(rank)))]
        ok = True
        while todo and ok:
            at, tags = todo.pop()
            site.chain.append(at)
            ok = at.name not in returned
            for reader in readers.get(at.name, []):
                if reader.op in _PADS and _src(reader.input[0]) == at.name:
                    site.pads.append((reader, tags))
                elif reader.op == "Shape":
                    site.shapes.append((reader, tags))
                elif reader.op in _PASS and _src(reader.input[0]) == at.name:
                    after = _tags(fdef, reader, tags)
                    ok = ok and after is not None
                    todo.append((reader, after or []))
                else:
                    ok = False
        if ok and site.pads:
            out.append(site)
    return out


def _rank(fdef: Any, nd: Any) -> int | None:
    """The Slice's rank: the length of its begin or size, a Const or a Pack (maybe cast)."""
    by_name = {n.name: n for n in fdef.node_def}
    for ref in nd.input[1:3]:
        at = by_name.get(_src(ref))
        while at is not None and at.op in ("Cast", "Identity"):
            at = by_name.get(_src(at.input[0]))
        if at is not None and at.op == "Pack":
            return len([i for i in at.input if not i.startswith("^")])
        value = _const(fdef, at.name) if at is not None else None
        if value is not None and value.ndim == 1:
            return int(value.size)
    return None


def _all_const(fdef: Any, site: _Site) -> bool:
    """True when the crop's begin and size and the pads' paddings are constants (also as
    stacks of constants, as tf.image builds them from static shapes)."""
    by_name = {n.name: n for n in fdef.node_def}
    refs = [(r, site.rank) for r in site.slice_node.input[1:3]]
    refs += [(pad.input[1], 2 * len(tags)) for pad, tags in site.pads]
    return all(set(linear(by_name, ref, k, n) or "?") == {""} for ref, n in refs for k in range(n))


def _pad_shape(fdef: Any, pad: Any, rank: int, declared: list[Any]) -> list[int] | None:
    """The pad's output shape when it is the same for every example: followed (through
    _PASS ops) to a function output whose declared shape fixes each of its axes."""
    readers = _consumers(fdef)
    rets = {_src(ref): key for key, ref in fdef.ret.items()}
    names = [a.name for a in fdef.signature.output_arg]
    at, ones = pad, set()
    tags: Tags = list(range(rank))
    shape = None
    while shape is None and at.name not in rets:
        nxt = readers.get(at.name, [])
        if len(nxt) != 1:
            return None
        if nxt[0].op == "EnsureShape":  # tf.ensure_shape: the shape it checks
            shape = _dims(nxt[0].attr["shape"].shape)
            if shape is None:
                return None
            break
        after = _tags(fdef, nxt[0], tags) if nxt[0].op in _PASS else None
        if after is None:
            return None
        ones |= set(tags) - set(after)  # squeezed axes of the pad's output are 1
        at, tags = nxt[0], after
    if shape is None:
        i = names.index(rets[at.name])
        shape = declared[i] if i < len(declared) else None
    if shape is None or len(shape) != len(tags):
        return None
    dims = {t: d for t, d in zip(tags, shape, strict=True) if t is not None}
    out = [1 if a in ones else dims.get(a, -1) for a in range(rank)]
    return out if all(d >= 0 for d in out) else None


# ---- the padded shape proved from the paddings' arithmetic (crop_algebra.py) -------------
def _proved_shape(fdef: Any, site: _Site, pad: Any, tags: Tags) -> list[int] | None:
    """The pad's output shape when its paddings plus the crop's size sum to constants."""
    by_name = {n.name: n for n in fdef.node_def}
    shapes = {n.name: t for n, t in site.shapes}

    def crop_dim(name: str, k: int) -> Linear | None:  # a Shape of the crop: its size
        return _extent(by_name, site, shapes[name][k]) if name in shapes else None

    out = []
    for j, t in enumerate(tags):
        pads = (linear(by_name, pad.input[1], 2 * j + c, 2 * len(tags), crop_dim) for c in (0, 1))
        total: Linear = {}
        for part in [*pads, _extent(by_name, site, t)]:
            for atom, c in (part or {"?": 1}).items():  # "?": no sum known
                total[atom] = total.get(atom, 0) + c
        if any(c for atom, c in total.items() if atom != ""):
            return None
        out.append(total.get("", 0))
    return out if all(d >= 0 for d in out) else None


def _extent(by_name: dict[str, Any], site: _Site, t: int | None) -> Linear:
    """The crop's size along Slice axis `t` (None: a new axis of 1). A negative constant
    ("to the end") is an atom of its own; masked_fn checks at run time the sum it proves."""
    if t is None:
        return {"": 1}
    size = linear(by_name, site.slice_node.input[2], t, site.rank)
    if size is None or (set(size) == {""} and size[""] < 0):
        return {(site.slice_node.name, "size", t): 1}
    return size


def _replace(fdef: Any, site: _Site, outs: list[Any]) -> None:
    """The site's pads and Shape nodes turned into Identities of inlined masked forms."""
    import tensorflow as tf

    x_ref, begin_ref, size_ref = site.slice_node.input[:3]
    dtype = tf.dtypes.as_dtype(site.slice_node.attr["T"].type)
    index = tf.dtypes.as_dtype(site.slice_node.attr["Index"].type)
    control = sorted({i for n in site.chain for i in n.input if i.startswith("^")})
    for k, (pad, tags) in enumerate(site.pads):
        pad_t = tf.dtypes.as_dtype(pad.attr["Tpaddings"].type)
        args = [x_ref, begin_ref, size_ref, pad.input[1], *pad.input[2:3]]
        specs = [
            tf.TensorSpec(None, dtype),
            tf.TensorSpec([site.rank], index),
            tf.TensorSpec([site.rank], index),
            tf.TensorSpec([len(tags), 2], pad_t),
            *([tf.TensorSpec([], dtype)] if pad.op == "PadV2" else []),
        ]
        body = _masked_fn(site.rank, tags, outs[k], _plan(fdef, site, pad, tags))
        ret = _inline(fdef, body, specs, args, f"{pad.name}/masked")
        _become_identity(pad, ret, dtype, control)
    for shape, tags in site.shapes:
        out_t = tf.dtypes.as_dtype(shape.attr["out_type"].type)
        specs = [tf.TensorSpec([site.rank], index)] * 2 + [tf.TensorSpec(None, dtype)]
        body = _shape_fn(tags, out_t)
        ret = _inline(fdef, body, specs, [begin_ref, size_ref, x_ref], f"{shape.name}/masked")
        _become_identity(shape, ret, out_t, [])


def _plan(fdef: Any, site: _Site, pad: Any, tags: Tags) -> Plan:
    """What each padded axis needs, seen from the graph: "fixed" (no crop nor pad: the
    crop's first rows), "inplace" (padded back where it was cropped, as a cutout: a mask),
    else "gather"; and the squeezed axes' begins that are constants."""
    by_name = {n.name: n for n in fdef.node_def}
    begin = [linear(by_name, site.slice_node.input[1], k, site.rank) for k in range(site.rank)]
    kinds = []
    for j, t in enumerate(tags):
        before, after = (linear(by_name, pad.input[1], 2 * j + c, 2 * len(tags)) for c in (0, 1))
        start = begin[t] if t is not None else {}
        if t is None or all(_zero(v) for v in (start, before, after)):
            kinds.append("fixed")
        elif before is not None and start is not None and _zero(_minus(before, start)):
            kinds.append("inplace")
        else:
            kinds.append("gather")
    squeezed = {k: b.get("", 0) for k, b in enumerate(begin) if b is not None and set(b) <= {""}}
    return kinds, squeezed


def _zero(v: Linear | None) -> bool:
    return v is not None and not any(v.values())


def _minus(a: Linear, b: Linear) -> Linear:
    return {x: a.get(x, 0) - b.get(x, 0) for x in {*a, *b}}


def _become_identity(nd: Any, ref: str, dtype: Any, control: list[str]) -> None:
    """`nd` (whose output is named "output", like Identity's) now passes on `ref`."""
    nd.op = "Identity"
    del nd.input[:]
    nd.input.extend([ref, *control])
    nd.attr.clear()
    nd.attr["T"].type = dtype.as_datatype_enum


def _inline(fdef: Any, body: Any, specs: list[Any], args: list[str], prefix: str) -> str:
    """`body` traced for `specs`, its nodes added to `fdef` under `prefix` reading `args`;
    returns the reference to its one output."""
    import tensorflow as tf

    inner = tf.function(body, autograph=False).get_concrete_function(*specs).function_def
    params = {a.name: ref for a, ref in zip(inner.signature.input_arg, args, strict=True)}

    def moved(ref: str) -> str:
        hat = "^" if ref.startswith("^") else ""
        head, _, rest = ref.lstrip("^").partition(":")
        if head in params:
            return params[head]
        return f"{hat}{prefix}/{head}" + (f":{rest}" if rest else "")

    for nd in inner.node_def:
        new = fdef.node_def.add()
        new.CopyFrom(nd)
        new.name = f"{prefix}/{nd.name}"
        del new.input[:]
        new.input.extend(moved(i) for i in nd.input)
    return moved(inner.ret[inner.signature.output_arg[0].name])


def _shape_fn(tags: Tags, out_t: Any) -> Any:
    """The Shape of the crop at axes `tags`: the Slice's size, -1 resolved."""
    import tensorflow as tf

    def shape(begin: Any, size: Any, x: Any) -> Any:
        size = _resolved(x, begin, size)
        dims = [size[t] if t is not None else tf.constant(1, size.dtype) for t in tags]
        return tf.cast(tf.stack(dims), out_t)

    return shape


def _resolved(x: Any, begin: Any, size: Any) -> Any:
    """Slice's size with -1 ("to the end") replaced by what it means."""
    import tensorflow as tf

    dims = tf.shape(x, out_type=size.dtype)
    return tf.where(size < 0, dims - begin, size)


_CHECK = "the padded crop's shape differs from the one the vectorized map was built for"


def _masked_fn(
    rank: int, tags: Tags, out: list[int], plan: tuple[list[str], dict[int, int]]
) -> Any:
    """pad(slice(x, begin, size), paddings[, value]) as gathers and a select: the Slice's
    axes not in `tags` (squeezed on the way) are taken at their begin, axes None are new.
    `plan` (see _plan) spares the gathers of axes that need none."""
    import tensorflow as tf

    kinds, const_begin = plan

    def fit(y: Any, j: int, n: int) -> Any:  # axis j's first n rows, zeros past its end
        more = tf.maximum(n - tf.shape(y)[j], 0)
        pads = tf.stack([[0, more if i == j else 0] for i in range(len(tags))])
        return tf.slice(
            tf.pad(y, pads), [0] * len(tags), [n if i == j else -1 for i in range(len(tags))]
        )

    def masked(x: Any, begin: Any, size: Any, paddings: Any, value: Any = None) -> Any:
        size = _resolved(x, begin, size)
        dims = tf.shape(x, out_type=size.dtype)
        y = x
        for k in sorted(set(range(rank)) - set(tags), reverse=True):
            y = tf.gather(y, const_begin.get(k, begin[k]), axis=k)  # a scalar drops the axis
        for j, t in enumerate(tags):
            if t is None:
                y = tf.expand_dims(y, j)
        mask, checks = None, []
        for j, t in enumerate(tags):
            r = tf.range(out[j], dtype=size.dtype)
            before = tf.cast(paddings[j, 0], size.dtype)
            one = tf.constant(1, size.dtype)
            start, extent, dim = (begin[t], size[t], dims[t]) if t is not None else (0, one, one)
            checks.append(before + extent + tf.cast(paddings[j, 1], size.dtype) == out[j])
            if kinds[j] != "gather":  # row r of the result is row r of x
                y = fit(y, j, out[j])
            else:
                y = tf.gather(y, tf.clip_by_value(r - before + start, 0, dim - 1), axis=j)
            if kinds[j] == "fixed":
                continue  # every row valid
            valid = (r >= before) & (r < before + extent)
            valid = tf.reshape(valid, [out[j] if i == j else 1 for i in range(len(tags))])
            mask = valid if mask is None else mask & valid
        fill = tf.zeros([], x.dtype) if value is None else value
        # The padded shape, taken as fixed, checked per example (Pad's own error otherwise).
        ok = tf.raw_ops.Assert(condition=tf.reduce_all(tf.stack(checks)), data=[_CHECK])
        with tf.control_dependencies([ok]):
            return y if mask is None else tf.where(mask, y, fill)

    return masked
