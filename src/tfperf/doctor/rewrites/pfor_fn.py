"""One tf.data map's function vectorized over a batch by TensorFlow's own vectorizer (pfor,
as tf.vectorized_map does it): its FunctionDef loaded from the dataset's graph, traced under
pfor without the while-loop fallback, and returned as FunctionDefs to put back in the graph;
or the reason, in a user's words, why it cannot be.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from tfperf.doctor.rewrites import masked_crop

_IMAGE_DECODERS = ("DecodePng", "DecodeJpeg", "DecodeImage", "DecodeBmp", "DecodeGif")
# Ops that take one element only (a scalar file name or encoded image): no batched form.
PER_ELEMENT_OPS = frozenset({*_IMAGE_DECODERS, "DecodeAndCropJpeg", "DecodeWav", "ReadFile"})
_PYTHON_OPS = {
    "PyFunc": "numpy_function",
    "PyFuncStateless": "numpy_function",
    "EagerPyFunc": "py_function",
}


class Refused(Exception):
    """A map that cannot be vectorized; the message says why, for a user. `per_element`:
    it uses an op TensorFlow has only for one element (a file read, an image decode), so
    no hand-written batched version exists either (the map can only run in parallel)."""

    def __init__(self, why: str, per_element: bool = False):
        super().__init__(why)
        self.per_element = per_element


@dataclass
class Vectorized:
    """F: the name of the vectorized function and the FunctionDefs to add to the library."""

    name: str
    fdefs: list[Any]
    in_types: list[int]  # per-example input: DataType enums and TensorShapeProtos
    in_shapes: list[Any]


def library_of(graph_def: Any, name: str) -> Any:
    """A FunctionDefLibrary with the function `name` and every function it calls."""
    from tensorflow.core.framework import function_pb2

    by_name = {f.signature.name: f for f in graph_def.library.function}
    lib = function_pb2.FunctionDefLibrary()
    todo, seen = [name], set()
    while todo:
        fname = todo.pop()
        if fname in seen or fname not in by_name:
            continue
        seen.add(fname)
        lib.function.add().CopyFrom(by_name[fname])
        for nd in by_name[fname].node_def:
            todo.append(nd.op)  # a function called by name as an op
            for value in nd.attr.values():
                todo.extend([value.func.name] if value.func.name else [])
                todo.extend(f.name for f in value.list.func)
    return lib


# pfor's trace of a function costs up to seconds and is asked for twice (the doctor's rules:
# does the map convert? --fix: the vectorized map): each is traced once per process.
_TRACED: dict[tuple[Any, ...], Vectorized | Refused] = {}
_MAX_TRACED = 256  # a long-lived process (tfperf.optimize in a loop) starts over past this


def vectorize_function(g: Any, nodes: dict[str, Any], node: Any, lead: int) -> Vectorized:
    """The map `node`'s function vectorized over a batch of `lead` (-1: unknown) elements;
    Refused says why it cannot be. Both are remembered per function (see _TRACED)."""
    key = _trace_key(nodes, node, lead)
    hit = _TRACED.get(key)
    if hit is None:
        try:
            hit = _vectorize(g, nodes, node, lead)
        except Refused as why:
            hit = why
        if len(_TRACED) >= _MAX_TRACED:
            _TRACED.clear()
        _TRACED[key] = hit
    if isinstance(hit, Refused):
        raise Refused(str(hit), hit.per_element)
    return hit


def _trace_key(nodes: dict[str, Any], node: Any, lead: int) -> tuple[Any, ...]:
    """What a trace depends on: the function (a traced function's name is unique in the
    process), the batch dimension, the captured inputs' and outputs' types and the shapes
    declared by the map's input dataset."""
    src = nodes.get(node.input[0].split(":")[0])
    shapes = src.attr["output_shapes"].SerializeToString() if src is not None else b""
    attrs = (node.attr["Targuments"], node.attr["output_types"])
    return (node.attr["f"].func.name, lead, *(a.SerializeToString() for a in attrs), shapes)


def _vectorize(g: Any, nodes: dict[str, Any], node: Any, lead: int) -> Vectorized:
    """vectorize_function without the memory: loads the function and traces it under pfor."""
    import tensorflow as tf
    from tensorflow.python.saved_model import function_deserialization

    name = node.attr["f"].func.name
    # Crops padded back to a fixed shape become masked gathers pfor can batch.
    lib = masked_crop.rewrite_library(library_of(g, name), name, node.attr["output_shapes"])
    ops = {nd.op for f in lib.function for nd in f.node_def}
    python = sorted(ops & _PYTHON_OPS.keys())
    if python:  # pfor would refuse them too; said without tracing
        raise Refused(_reason(python[0]))
    _register_converters()
    fn = function_deserialization.load_function_def_library(lib, _signatures(lib))[name]
    n_caps = len(node.attr["Targuments"].list.type)
    inputs = fn.graph.inputs[: len(fn.graph.inputs) - n_caps] if n_caps else fn.graph.inputs
    if any(t.dtype == tf.variant for t in inputs):
        raise Refused(
            "its input holds SparseTensor, RaggedTensor or dataset components, which "
            "TensorFlow's vectorizer cannot take batched"
        )
    shapes = _input_shapes(nodes, node, inputs)
    dim = None if lead < 0 else lead
    specs = [
        tf.TensorSpec(tf.TensorShape([dim]).concatenate(s), t.dtype)
        for s, t in zip(shapes, inputs, strict=True)
    ]
    caps = [tf.TensorSpec(None, tf.dtypes.as_dtype(t)) for t in node.attr["Targuments"].list.type]
    k = len(specs)

    def batched(*args: Any) -> list[Any]:
        def one(xs: Any) -> list[Any]:
            return tf.nest.flatten(fn._call_flat(list(xs) + list(args[k:]), []))

        return tf.vectorized_map(one, tuple(args[:k]), fallback_to_while_loop=False)

    traced = tf.function(batched, input_signature=specs + caps, autograph=False)
    try:
        with _quiet():
            cf = traced.get_concrete_function()
    except Exception as exc:  # noqa: BLE001 - pfor raises ValueError, or an op's own error
        raise _pfor_refusal(exc) from None
    outs = [t.dtype.as_datatype_enum for t in cf.outputs]
    if outs != list(node.attr["output_types"].list.type):
        raise Refused("its vectorized outputs differ in type from the per-example ones")
    fdefs = [
        _pruned(cf.function_def, tf.compat.as_str(fn.name)),
        *cf.graph.as_graph_def().library.function,
    ]
    types = [t.dtype.as_datatype_enum for t in inputs]
    protos = [s.as_proto() for s in shapes]
    return Vectorized(cf.function_def.signature.name, fdefs, types, protos)


def _signatures(lib: Any) -> Any:
    """A SavedObjectGraph giving each function of `lib` its flat input and output signature:
    the loader otherwise makes functions that return nothing (pfor reads their outputs)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_object_graph_pb2
    from tensorflow.python.saved_model import nested_structure_coder

    def spec(fdef: Any, arg: Any, i: int | None) -> Any:
        shapes = fdef.arg_attr[i].attr["_output_shapes"].list.shape if i is not None else []
        shape = tf.TensorShape(shapes[0]) if len(shapes) == 1 else None
        return tf.TensorSpec(shape, tf.dtypes.as_dtype(arg.type))

    graph = saved_object_graph_pb2.SavedObjectGraph()
    for fdef in lib.function:
        ins = tuple(spec(fdef, a, i) for i, a in enumerate(fdef.signature.input_arg))
        outs = [spec(fdef, a, None) for a in fdef.signature.output_arg]
        saved = graph.concrete_functions[fdef.signature.name]
        saved.canonicalized_input_signature.CopyFrom(
            nested_structure_coder.encode_structure((ins, {}))
        )
        saved.output_signature.CopyFrom(nested_structure_coder.encode_structure(outs))
    return graph


def _pruned(fdef: Any, per_example: str) -> Any:
    """`fdef` without pfor's leftover: the per-example call it converted stays in the graph,
    tied to the outputs by control edges when stateful, so it would run on each batch's first
    element. The calls to `per_example` go, then every node the outputs do not need."""
    out = copy.deepcopy(fdef)
    dead = {
        nd.name for nd in out.node_def if "f" in nd.attr and nd.attr["f"].func.name == per_example
    }
    for nd in out.node_def:
        kept = [i for i in nd.input if i.lstrip("^").split(":")[0] not in dead]
        del nd.input[:]
        nd.input.extend(kept)
    nodes = {nd.name: nd for nd in out.node_def}
    todo, keep = list(out.ret.values()), set()
    while todo:
        ref = todo.pop().lstrip("^").split(":")[0]
        if ref in nodes and ref not in keep and ref not in dead:
            keep.add(ref)
            todo.extend(nodes[ref].input)
    kept_nodes = [copy.deepcopy(nd) for nd in out.node_def if nd.name in keep]
    del out.node_def[:]
    out.node_def.extend(kept_nodes)
    for key in [k for k, v in out.control_ret.items() if v not in keep]:
        del out.control_ret[key]
        out.signature.control_output.remove(key)
    return out


def _input_shapes(nodes: dict[str, Any], node: Any, inputs: list[Any]) -> list[Any]:
    """Per-example shapes entering the map: the input dataset's, refined by the function's."""
    import tensorflow as tf

    src = nodes.get(node.input[0].split(":")[0])
    declared = src.attr["output_shapes"].list.shape if src is not None else []
    if len(declared) != len(inputs):  # a reader (TFRecordDataset) declares none
        return [t.shape for t in inputs]
    out = []
    for proto, t in zip(declared, inputs, strict=True):
        shape = tf.TensorShape(proto)
        out.append(shape.merge_with(t.shape) if shape.is_compatible_with(t.shape) else shape)
    return out


class _quiet:
    """TensorFlow's logger silenced: pfor logs each op it refuses with stack traces."""

    def __enter__(self) -> None:
        import tensorflow as tf

        self.logger = tf.get_logger()
        self.level = self.logger.level
        self.logger.setLevel("CRITICAL")

    def __exit__(self, *exc: Any) -> None:
        self.logger.setLevel(self.level)


# ---- converters pfor lacks --------------------------------------------------------------
# Ops that work element by element on one input (the others the same for every example): on
# the batch they give each example's result. Value: the position of that input.
_ELEMENTWISE = {
    "StringUpper": 0,
    "StringLower": 0,
    "StringStrip": 0,
    "StaticRegexReplace": 0,
    "RegexReplace": 0,
    "StringToNumber": 0,
    "StringToHashBucket": 0,
    "StringToHashBucketFast": 0,
    "StringToHashBucketStrong": 0,
    "AsString": 0,
    "StringLength": 0,
    "DecodeBase64": 0,
    "EncodeBase64": 0,
    "DecodeCompressed": 0,
    # Raw bytes to numbers (images stored as bytes): one [batch, n] tensor when every
    # example of the batch has as many bytes, as batch() needs of their decoded shapes too.
    "DecodeRaw": 0,
    "DecodePaddedRaw": 0,
    "LookupTableFindV2": 1,  # (table, keys, default): a vocabulary lookup
}
# Image resizes: tf.image.resize gives them one image as a batch of 1.
_RESIZES = ("ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic", "ResizeArea")


def _register_converters() -> None:
    """Teaches pfor the ops above and SerializeSparse (how a map returns a SparseTensor,
    e.g. a VarLenFeature: the batch's SparseTensor, as parse_example gives it, serialized
    row by row). Ops TensorFlow already converts are left to it."""
    from tensorflow.python.ops import gen_sparse_ops
    from tensorflow.python.ops.parallel_for import pfor

    def register(op: str, convert: Any) -> None:
        if op not in pfor._pfor_converter_registry:
            pfor.RegisterPFor(op)(convert)

    def elementwise(pfor_input: Any, pos: int) -> Any:
        parts = [pfor_input.input(i) for i in range(pfor_input.num_inputs)]
        if any(p.is_stacked for i, p in enumerate(parts) if i != pos):
            raise pfor.ConversionNotImplementedError(f"{pfor_input.op_type}: per-example args")
        dtypes = [o.dtype for o in pfor_input.outputs]
        attrs = pfor_input.op.node_def.attr
        out = pfor._create_op(pfor_input.op_type, [p.t for p in parts], dtypes, attrs).outputs
        return [pfor.wrap(o, parts[pos].is_stacked) for o in out]

    def resize(pfor_input: Any) -> Any:
        images = pfor._flatten_first_two_dims(pfor_input.stacked_input(0))
        size = pfor_input.unstacked_input(1)
        dtypes = [o.dtype for o in pfor_input.outputs]
        attrs = pfor_input.op.node_def.attr
        out = pfor._create_op(pfor_input.op_type, [images, size], dtypes, attrs).outputs[0]
        return pfor.wrap(pfor._unflatten_first_dim(out, pfor_input.pfor.loop_len_vector), True)

    def serialize_sparse(pfor_input: Any) -> Any:
        parts = [pfor_input.input(i) for i in range(3)]
        if not all(p.is_sparse_stacked for p in parts):
            # Built per example (not parsed from the batch): rows cannot be told apart.
            raise pfor.ConversionNotImplementedError("SerializeSparse of a per-example tensor")
        out_type = pfor_input.get_attr("out_type")
        rows = gen_sparse_ops.serialize_many_sparse(*(p.t for p in parts), out_type=out_type)
        return pfor.wrap(rows, True)

    for op, pos in _ELEMENTWISE.items():
        register(op, lambda pfor_input, pos=pos: elementwise(pfor_input, pos))
    for op in _RESIZES:
        register(op, resize)
    register("SerializeSparse", serialize_sparse)


def _reason(op: str) -> str:
    """Why a map using `op` stays per-example, in words a user reads."""
    if op in _PYTHON_OPS:
        return (
            f"the map calls a Python function ({_PYTHON_OPS[op]}), which TensorFlow cannot "
            "vectorize"
        )
    if op in _IMAGE_DECODERS:
        return (
            f"the map decodes images one at a time ({op}); TensorFlow has no batched "
            "decoder to vectorize it with"
        )
    for ops, words in _WHY.items():
        if op in ops:
            return f"the map {words} ({op}), which TensorFlow's vectorizer cannot batch"
    return f"the map uses {op}, which TensorFlow's vectorizer (pfor) cannot convert"


# What a map does when it uses these ops, for the reason a user reads.
_WHY = {
    ("SerializeSparse",): "returns a SparseTensor it builds per example",
    ("ReadFile",): "reads one file per example",
    ("StringSplitV2", "StringSplit", "UnicodeDecode", "UnicodeDecodeWithOffsets"): (
        "splits text into a different number of pieces per example"
    ),
    ("StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg"): (
        "draws seeded random numbers per example with tf.random.stateless_*"
    ),
}


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first: pfor's own error on a
    function loaded from a graph lies under TensorFlow's failure to format its traceback
    ("TypeError: 'NoneType' object is not iterable")."""
    out: list[BaseException] = []
    at: BaseException | None = exc
    while at is not None and at not in out and len(out) < 16:
        out.append(at)
        at = at.__cause__ or at.__context__
    return out


def _pfor_refusal(exc: Exception) -> Refused:
    for e in _chain(exc):
        found = re.search(r"No pfor vectorization defined for (\w+)", str(e))
        if found:
            return Refused(_reason(found.group(1)), found.group(1) in PER_ELEMENT_OPS)
        if "SerializeSparse" in str(e):
            return Refused(_reason("SerializeSparse"))
        varies = re.search(r"Input \"(\w+)\" of op '(\w+)' expected to be loop invariant", str(e))
        if varies:
            arg, op = varies.groups()
            return Refused(
                f"the vectorizer failed on {op}: its {arg} differs per example (e.g. a crop of "
                "a size drawn per example, not padded back to one shape), and TensorFlow's "
                "vectorizer (pfor) needs one for the whole batch"
            )
    first = (str(exc).splitlines() or [""])[0][:160]
    return Refused(f"TensorFlow's vectorizer (pfor) failed on it: {type(exc).__name__}: {first}")
