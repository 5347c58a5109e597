"""Map fission: a per-example map holding an op TensorFlow's vectorizer (pfor) cannot convert
(a file read, an image decode, a random crop box) is split in two. Its first part, up to the
last such op and up to where every tensor the rest needs has one fixed shape (a decoded image
resized to a fixed size), stays per-example; the rest becomes a second per-example map right
before the batch, which vectorize.py then moves after the batch, vectorized over it:
map(f).batch(n) becomes map(f_a, parallel).batch(n).map(pfor(f_b)).

It works on the map's function as a graph (the user gives a Dataset, not code): the function
is loaded, its ops partitioned, and each part imported into a function of its own. Stateful
random ops in the vectorized part draw per example, as in vectorize.py (another stream of
draws than the per-example map's; --fix does not compare the examples of a random pipeline).
It times nothing: fix/ measures the result and checks it still yields the same examples.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites import pfor_fn, vectorize
from tfperf.doctor.rewrites.pfor_fn import PER_ELEMENT_OPS, Refused, library_of

if TYPE_CHECKING:
    import tensorflow as tf

# Ops that cost nothing and that pfor never needs to convert (inside nested functions too).
_FREE = frozenset({"Const", "NoOp", "Placeholder", "Identity", "_Arg", "_Retval"})
# Ops that only reshape: a second part of these alone is not worth a map of its own.
_TRIVIAL = _FREE | {"Squeeze", "ExpandDims", "Reshape", "Shape", "StridedSlice", "Pack"}
# Stateful ops that read what every example shares (a captured variable).
_READS = frozenset({"ReadVariableOp", "VarHandleOp"})
_PY_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


@dataclass
class _Split:
    """The two functions a map's function becomes, as FunctionDefs for the graph's library."""

    name_a: str
    name_b: str
    fdefs: list[Any]
    cut_types: list[int]  # what f_a returns and f_b takes: DataType enums, TensorShapeProtos
    cut_shapes: list[Any]
    stays: list[str]  # the op types kept per example, for the note
    ops: set[str]  # every op type of the function


def split_site(graph: lint.DatasetGraph) -> lint.GraphStage | None:
    """The map that split_maps would split first, from its ops alone (no trace): in a chain of
    maps right before a batch, the last one holding an op pfor has no converter for, unless it
    calls Python (py_function: left alone). None: nothing to split."""
    for _, chain in vectorize._chains(graph):
        maps = [st for st in chain if st.kind == "map"]
        for st in reversed(maps):
            if st.has_py_func:
                break
            if _unconvertible_types(st.fn_ops):
                return st
    return None


def split_maps(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """`ds` with the per-example map of each chain that pfor refuses split in two, the second
    part vectorized after the batch (vectorize.vectorize_maps on the split graph). None: no
    map splits into a part that vectorizes. Raises Refused (why) when a candidate map was
    found but could not be split."""
    force: set[str] = set()
    for _ in range(_ATTEMPTS):
        out, split, why, fallbacks = _attempt(graph, ds, force)
        if not split:
            if why:
                raise Refused("; ".join(why))
            return None
        # An op pfor refuses in the second part (a contrast factor drawn per example) is kept
        # per example on the next attempt.
        named = {w for _, r in fallbacks for w in re.findall(r"\b[A-Z]\w+\b", r)}
        more = named & set().union(*(p.ops for _, p in split)) - force
        if out is not None and (not fallbacks or not more):
            notes = [
                f"{label} split: per example up to {', '.join(p.stays)}, the rest vectorized"
                for label, p in split
            ]
            out.doctor_note = "; ".join(notes + why)
            return out
        if not more:
            break
        force |= more
    reasons = "; ".join(f"{label}: {r}" for label, r in fallbacks)
    raise Refused(f"its second part does not vectorize ({reasons})")


_ATTEMPTS = 3  # each traces the split maps and pfor once more


def _attempt(
    graph: lint.DatasetGraph, ds: tf.data.Dataset, force: set[str]
) -> tuple[tf.data.Dataset | None, list[tuple[str, _Split]], list[str], list[tuple[str, str]]]:
    """(the dataset split and vectorized or None, the maps split, why others were not, what
    vectorize_maps left per example), ops of the types in `force` kept per example."""
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    why: list[str] = []
    split: list[tuple[str, _Split]] = []
    for _, chain in vectorize._chains(graph):
        maps = [st for st in chain if st.kind == "map"]
        for st in reversed(maps):
            refused = vectorize.refusal(graph, st)
            if refused is None:
                continue  # vectorizes whole: vectorize.py's
            if str(refused).startswith("it comes before"):
                break  # a later map stays per-example: its own turn came first
            try:
                parts = _split_function(g, nodes[st.name], force)
            except Refused as exc:
                why.append(f"{st.label}: {exc}")
                break
            except Exception as exc:  # noqa: BLE001 - a function the loader or importer refuses
                why.append(f"{st.label}: its function could not be split ({type(exc).__name__})")
                break
            _edit(g, nodes, nodes[st.name], parts)
            split.append((st.label, parts))
            break
    if not split:
        return None, split, why, []
    cut = lint.rebuild(g, ds.element_spec)
    result = vectorize.vectorize_maps(lint.read_graph(cut), cut)
    out = result.dataset if result.done else None
    return out, split, why, result.fallbacks


# ---- the function's partition ---------------------------------------------------------------
def _unconvertible_types(ops: set[str]) -> set[str]:
    """Those of `ops` pfor has no converter for (or no batched form), Python calls excepted."""
    from tensorflow.python.ops.parallel_for import pfor

    pfor_fn._register_converters()
    registry = pfor._pfor_converter_registry
    return {op for op in ops if op not in _FREE | _PY_OPS and not _convertible(op, registry)}


def _convertible(op_type: str, registry: Any) -> bool:
    return op_type in registry and op_type not in PER_ELEMENT_OPS


def _nested_ok(op: Any, library: dict[str, Any], registry: Any) -> bool:
    """True when every op of the functions `op` calls (nested) pfor converts or needs not."""
    todo, seen = _called(op.node_def), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        for nd in library[name].node_def:
            if nd.op in library:
                todo.append(nd.op)  # a function called by name as an op
            elif nd.op not in _FREE and not _convertible(nd.op, registry):
                return False
            todo += _called(nd)
    return True


def _called(node_def: Any) -> list[str]:
    """The functions a node's attrs name (an If's branches, a call's function)."""
    out = []
    for value in node_def.attr.values():
        out += [value.func.name] if value.func.name else []
        out += [f.name for f in value.list.func]
    return out


def _fixed(t: Any) -> bool:
    return bool(t.shape.is_fully_defined())


def _split_function(g: Any, node: Any, force: set[str]) -> _Split:
    """The map `node`'s function cut in two (see the module's docstring); Refused: why not."""
    import tensorflow as tf
    from tensorflow.python.ops.parallel_for import pfor
    from tensorflow.python.saved_model import function_deserialization

    name = node.attr["f"].func.name
    lib = library_of(g, name)
    pfor_fn._register_converters()
    registry = pfor._pfor_converter_registry
    fn = function_deserialization.load_function_def_library(lib, pfor_fn._signatures(lib))[name]
    graph = fn.graph
    n_caps = len(node.attr["Targuments"].list.type)
    inputs = list(graph.inputs)
    elems, caps = inputs[: len(inputs) - n_caps], inputs[len(inputs) - n_caps :]
    if any(t.dtype == tf.variant for t in elems):
        raise Refused("its input holds SparseTensor, RaggedTensor or dataset components")
    library = {f.signature.name: f for f in lib.function}
    ops = graph.get_operations()  # in a loaded function: inputs before consumers
    stacked: set[str] = {t.op.name for t in elems}
    varies = {t.name for t in elems if not _fixed(t)}  # tensors of a shape per example
    seeds: set[str] = set()
    stays: set[str] = set()  # the op types pfor cannot convert, for the note
    for op in ops:
        if op.name in stacked:
            continue
        if op.type in _PY_OPS:
            raise Refused("it calls a Python function (py_function/numpy_function)")
        per_example = [t for t in op.inputs if t.op.name in stacked]
        if not per_example and (not op._is_stateful or op.type in _READS):
            continue  # the same for every example: recomputed in each part that reads it
        stacked.add(op.name)
        bad = not _convertible(op.type, registry) and op.type not in _FREE
        if bad or op.type in force or not _nested_ok(op, library, registry):
            seeds.add(op.name)
            stays.add(op.type)
        # A shape unknown only because a shared input's is (a captured variable's, whose
        # shape the dataset's graph loses) is the same for every example.
        made = all(_fixed(t) for t in op.inputs)
        if any(t.name in varies for t in per_example) or made or op.name in seeds:
            varies |= {t.name for t in op.outputs if not _fixed(t)}
        if any(t.name in varies for t in op.outputs):
            seeds.add(op.name)  # a shape per example: batched only once it is fixed
    by_name = {op.name: op for op in ops}
    first = _closure(seeds | {t.op.name for t in elems}, by_name, stacked)
    while True:  # a tensor of a shape per example cannot cross the batch: its reader stays
        more = {
            op.name
            for op in ops
            if op.name in stacked
            and op.name not in first
            and any(t.op.name in first and t.name in varies for t in op.inputs)
        }
        if not more:
            break
        first = _closure(first | more, by_name, stacked)
    rest = [op for op in ops if op.name in stacked and op.name not in first]
    if not stays or not any(op.type not in _TRIVIAL for op in rest):
        raise Refused("nothing after its last per-example op can be vectorized")
    outputs = list(graph.outputs)
    cut: list[Any] = []
    for t in [t for op in rest for t in op.inputs] + outputs:
        if t.op.name in first and all(t is not c for c in cut):
            cut.append(t)
    if not all(_fixed(t) for t in cut):
        raise Refused("what its per-example part returns has no fixed shape to batch")
    parts = _functions(fn, elems, caps, cut, outputs, sorted(stays))
    parts.ops = {op.type for op in ops}
    return parts


def _closure(names: set[str], by_name: dict[str, Any], stacked: set[str]) -> set[str]:
    """`names` with every per-example op they read from (data edges)."""
    out, todo = set(names), list(names)
    while todo:
        for t in by_name[todo.pop()].inputs:
            if t.op.name in stacked and t.op.name not in out:
                out.add(t.op.name)
                todo.append(t.op.name)
    return out


def _functions(
    fn: Any, elems: list[Any], caps: list[Any], cut: list[Any], outputs: list[Any], stays: Any
) -> _Split:
    """f_a(elements, captures) -> cut and f_b(cut, captures) -> outputs, each the function's
    graph pruned to what it needs and imported into a new tf.function."""
    import tensorflow as tf

    gdef = fn.graph.as_graph_def()
    cut_names = [t.name for t in cut]
    placeholders = {f"fission_cut_{i}": t for i, t in enumerate(cut)}
    gdef_a = pruned(gdef, cut_names, {})
    gdef_b = fed_from(gdef, [t.name for t in outputs], placeholders)
    cap_specs = [tf.TensorSpec(None, t.dtype) for t in caps]
    in_a = [t.op.name for t in elems + caps]
    in_b = list(placeholders) + [t.op.name for t in caps]

    def importer(sub: Any, names: list[str], returns: list[str]) -> Any:
        present = {n.name for n in sub.node}

        def call(*args: Any) -> list[Any]:
            feed = {f"{n}:0": a for n, a in zip(names, args, strict=True) if n in present}
            return tf.graph_util.import_graph_def(
                sub, input_map=feed, return_elements=returns, name="part"
            )

        return call

    outs_b = [renamed(t.name, placeholders) for t in outputs]
    specs_a = [tf.TensorSpec(t.shape, t.dtype) for t in elems] + cap_specs
    specs_b = [tf.TensorSpec(t.shape, t.dtype) for t in cut] + cap_specs
    fdefs: list[Any] = []
    names = []
    for sub, ins, outs, specs in (
        (gdef_a, in_a, cut_names, specs_a),
        (gdef_b, in_b, outs_b, specs_b),
    ):
        traced = tf.function(importer(sub, ins, outs), input_signature=specs, autograph=False)
        cf = traced.get_concrete_function()
        fdefs += [cf.function_def, *cf.graph.as_graph_def().library.function]
        names.append(cf.function_def.signature.name)
    types = [t.dtype.as_datatype_enum for t in cut]
    shapes = [t.shape.as_proto() for t in cut]
    return _Split(names[0], names[1], fdefs, types, shapes, stays, set())


def renamed(tensor: str, placeholders: dict[str, Any]) -> str:
    """`tensor`'s name in f_b's graph: a cut tensor is read from its placeholder."""
    for pname, t in placeholders.items():
        if t.name == tensor:
            return f"{pname}:0"
    return tensor


def fed_from(gdef: Any, fetches: list[str], placeholders: dict[str, Any]) -> Any:
    """`gdef` pruned to `fetches`, each tensor of `placeholders` (placeholder name -> tensor)
    read from a Placeholder of that name, of its dtype and shape."""
    out = pruned(gdef, fetches, {t.name: p for p, t in placeholders.items()})
    for pname, t in placeholders.items():
        ph = out.node.add()
        ph.name, ph.op = pname, "Placeholder"
        ph.attr["dtype"].type = t.dtype.as_datatype_enum
        ph.attr["shape"].shape.CopyFrom(t.shape.as_proto())
    return out


def pruned(gdef: Any, fetches: list[str], cut: dict[str, str]) -> Any:
    """`gdef` with only the nodes `fetches` read (data edges), a read of a `cut` tensor
    replaced by its placeholder's, and control edges to nodes left out dropped."""
    from tensorflow.core.framework import graph_pb2

    by_name = {n.name: n for n in gdef.node}

    def ref(name: str) -> str:
        return name if ":" in name else f"{name}:0"

    keep: set[str] = set()
    todo = [f.split(":")[0] for f in fetches if ref(f) not in cut]
    while todo:
        name = todo.pop()
        if name in keep or name not in by_name:
            continue
        keep.add(name)
        for i in by_name[name].input:
            if not i.startswith("^") and ref(i) not in cut:
                todo.append(i.split(":")[0])
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(gdef.versions)
    out.library.CopyFrom(gdef.library)
    for n in gdef.node:
        if n.name not in keep:
            continue
        new = out.node.add()
        new.CopyFrom(n)
        del new.input[:]
        for i in n.input:
            if i.startswith("^"):
                if i[1:] in keep:
                    new.input.append(i)
            else:
                new.input.append(f"{cut[ref(i)]}:0" if ref(i) in cut else i)
    return out


# ---- the dataset graph's edit -----------------------------------------------------------------
def _edit(g: Any, nodes: dict[str, Any], node: Any, parts: _Split) -> None:
    """src -> map(f) becomes src -> map(f_a) -> map(f_b): the first a copy of the map node
    (same inputs, parallelism and captures), the second the node itself, reading the copy."""
    have = {f.signature.name for f in g.library.function}
    for fdef in parts.fdefs:
        if fdef.signature.name not in have:
            g.library.function.add().CopyFrom(fdef)
            have.add(fdef.signature.name)
    first = g.node.add()
    first.CopyFrom(node)
    first.name = f"{node.name}/fission_a"
    first.attr["f"].func.name = parts.name_a
    first.attr["f"].func.attr.clear()
    del first.attr["output_types"].list.type[:]
    first.attr["output_types"].list.type.extend(parts.cut_types)
    del first.attr["output_shapes"].list.shape[:]
    for proto in parts.cut_shapes:
        first.attr["output_shapes"].list.shape.add().CopyFrom(proto)
    nodes[first.name] = first
    node.input[0] = first.name
    node.attr["f"].func.name = parts.name_b
    node.attr["f"].func.attr.clear()
