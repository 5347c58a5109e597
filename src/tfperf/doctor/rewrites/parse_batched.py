"""Records parsed per batch where no dense batch follows the parse: a per-example map that
parses one serialized tf.train.Example (variable-length features, VarLenFeature, too), whose
examples go on to a padded_batch, a bucketing, a filter or a packing loop (the vectorizer
batches a map only right before a dense batch; examples of varying shape never). The map
becomes

    batch(n) -> map(parse the batch, each VarLenFeature as ragged) -> unbatch -> map(rest)

where the first map is the map's own ParseExampleV2 run once per batch, and the second the
rest of the map's function on each example, fed the parsed tensors one example holds (a
VarLenFeature's SparseTensor rebuilt from its row of the ragged batch). The elements and
their order stay the same.

It works on the map's function as a graph (the user gives a Dataset, not code), as
fission.py does. It times nothing: fix/ measures the result and checks its examples.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites import splice
from tfperf.doctor.rewrites.fission import fed_from, pruned, renamed
from tfperf.doctor.rewrites.pfor_fn import Refused, _signatures, library_of

if TYPE_CHECKING:
    import tensorflow as tf

PARSE_OP = "ParseExampleV2"
MAP_OPS = frozenset({"MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2"})
BATCH_OPS = frozenset({"BatchDataset", "BatchDatasetV2", "ParallelBatchDataset"})
# Stages between the map and a dense batch that let the vectorizer batch the parse instead.
_PASS = frozenset({"shuffle", "prefetch", "options", "repeat"})
# Records parsed per call: a parse call's fixed cost spread over this many (the hand-tuned
# pipelines parse 256-4,096 at once); a bucketing or packing loop then waits for at most one
# batch of records more.
RECORDS_PER_BATCH = 256


def parse_sites(graph: lint.DatasetGraph) -> list[lint.GraphStage]:
    """Maps that parse (ParseExampleV2) and reach no dense batch (through shuffles,
    prefetches, options, repeats) before another stage; _cut says which it cannot cut."""
    out = []
    for st in graph.stages:
        if st.op not in MAP_OPS or PARSE_OP not in st.fn_ops or st.batched or st.has_py_func:
            continue
        after = [s for s in graph.stages[st.index + 1 :] if s.kind not in _PASS]
        if after and after[0].op in BATCH_OPS:
            continue  # a dense batch next: the vectorizer's (or the variable shapes fail it)
        out.append(st)
    return out


@dataclass
class _Parse:
    """The map's function cut at its parse: the parse alone (fed a batch of records) and the
    rest (fed one record and what the parse gave for it), as GraphDefs to import."""

    record: str  # the function's input placeholder (the serialized record)
    parse: Any  # GraphDef up to the parse node
    parse_outputs: list[str]  # the parse node's outputs, by name
    rest: Any  # GraphDef of the function's outputs, the parse's outputs read from placeholders
    rest_inputs: list[str]  # those placeholders, one per parse output
    outputs: list[str]  # the function's outputs in `rest`
    num_sparse: int
    num_dense: int
    # When each output is a parsed feature as it is (a dense one, or a VarLenFeature made
    # dense by tf.sparse.to_dense, which is the ragged batch's row): ("sparse" or "dense",
    # its index) per output, and the rest needs no map of its own.
    direct: list[tuple[str, int]] | None = None


def _cut(g: Any, node: Any) -> _Parse:
    """The map `node`'s function cut at its ParseExampleV2 (Refused: why it cannot be)."""
    import tensorflow as tf
    from tensorflow.python.saved_model import function_deserialization

    name = node.attr["f"].func.name
    lib = library_of(g, name)
    fn = function_deserialization.load_function_def_library(lib, _signatures(lib))[name]
    graph = fn.graph
    if len(node.attr["Targuments"].list.type):
        raise Refused("its function captures tensors or resources")
    inputs = list(graph.inputs)
    if len(inputs) != 1 or inputs[0].dtype != tf.string or inputs[0].shape.rank != 0:
        raise Refused("its element is not one serialized record")
    record = inputs[0]
    parses = [op for op in graph.get_operations() if op.type == PARSE_OP]
    if len(parses) != 1:
        raise Refused("it parses more than once")
    parse = parses[0]
    source = parse.inputs[0]
    while source.op.type == "Identity":
        source = source.op.inputs[0]
    if source is not record:
        raise Refused("it parses something other than its record")
    if parse.get_attr("ragged_value_types"):
        raise Refused("it parses RaggedFeatures")
    if not all(tf.TensorShape(s).is_fully_defined() for s in parse.get_attr("dense_shapes")):
        raise Refused("a FixedLenSequenceFeature would be padded per batch")
    num_sparse = int(parse.get_attr("num_sparse"))
    gdef = graph.as_graph_def()
    outs = [t.name for t in parse.outputs]
    placeholders = {f"tfperf_parsed_{i}": t for i, t in enumerate(parse.outputs)}
    rest = fed_from(gdef, [t.name for t in graph.outputs], placeholders)
    outputs = [renamed(t.name, placeholders) for t in graph.outputs]
    return _Parse(
        direct=_direct(parse, list(graph.outputs)),
        record=record.op.name,
        parse=pruned(gdef, outs, {}),
        parse_outputs=outs,
        rest=rest,
        rest_inputs=list(placeholders),
        outputs=outputs,
        num_sparse=num_sparse,
        num_dense=len(parse.get_attr("Tdense")),
    )


def _direct(parse: Any, outputs: list[Any]) -> list[tuple[str, int]] | None:
    """Each output as ("sparse", k) (tf.sparse.to_dense of VarLenFeature k: indices 0..n-1
    fill its dense shape [n], so its default value is never read) or ("dense", j) (dense
    feature j); None when some output is anything else."""
    s = int(parse.get_attr("num_sparse"))
    where = {t.name: i for i, t in enumerate(parse.outputs)}

    def source(t: Any) -> Any:
        while t.op.type == "Identity":
            t = t.op.inputs[0]
        return t

    out: list[tuple[str, int]] = []
    for t in outputs:
        t = source(t)
        if t.name in where and 3 * s <= where[t.name]:
            out.append(("dense", where[t.name] - 3 * s))
            continue
        if t.op.type != "SparseToDense":
            return None
        ins = [where.get(source(x).name) for x in t.op.inputs[:3]]
        k = ins[0]
        if k is None or k >= s or ins[1] != 2 * s + k or ins[2] != s + k:
            return None  # not (indices_k, shape_k, values_k) of one VarLenFeature
        out.append(("sparse", k))
    return out


def _batched_parse(cut: _Parse) -> Any:
    """records[n] -> (records, each VarLenFeature as a ragged [n, None], each dense [n, ...])."""
    import tensorflow as tf

    def parse(records: tf.Tensor) -> tuple[Any, ...]:
        got = tf.graph_util.import_graph_def(
            cut.parse,
            input_map={f"{cut.record}:0": records},
            return_elements=cut.parse_outputs,
            name="tfperf_parse",
        )
        s = cut.num_sparse
        indices, values, shapes = got[:s], got[s : 2 * s], got[2 * s : 3 * s]
        dense = got[3 * s : 3 * s + cut.num_dense]
        ragged = [
            tf.RaggedTensor.from_value_rowids(v, i[:, 0], nrows=sh[0])
            for i, v, sh in zip(indices, values, shapes, strict=True)
        ]
        if cut.direct is not None:  # the map's outputs, one batch of them
            return tuple(ragged[i] if kind == "sparse" else dense[i] for kind, i in cut.direct)
        return (records, *ragged, *dense)

    return parse


def _rest(cut: _Parse) -> Any:
    """(record, each VarLenFeature's values, each dense) -> the map's outputs, the parse's
    outputs for one record rebuilt: a VarLenFeature of n values is indices [[0] .. [n-1]],
    its values, and the dense shape [n]."""
    import tensorflow as tf

    def rest(record: tf.Tensor, *parts: tf.Tensor) -> tuple[Any, ...]:
        s = cut.num_sparse
        values, dense = parts[:s], parts[s:]
        lengths = [tf.shape(v, out_type=tf.int64)[0] for v in values]
        indices = [tf.range(n)[:, None] for n in lengths]
        shapes = [tf.reshape(n, [1]) for n in lengths]
        feed = dict(zip(cut.rest_inputs, [*indices, *values, *shapes, *dense], strict=True))
        feed = {f"{k}:0": v for k, v in feed.items()}
        present = {n.name for n in cut.rest.node}
        if cut.record in present:
            feed[f"{cut.record}:0"] = record
        got = tf.graph_util.import_graph_def(
            cut.rest, input_map=feed, return_elements=cut.outputs, name="tfperf_rest"
        )
        return tuple(got)

    return rest


def _register(mapped: tf.data.Dataset) -> None:
    """The functions a new map's traced function calls (a tf.cond's branches, imported with
    the cut graph under new names) made known to the eager context, where the dataset's
    serialization looks them up ("Unable to find FunctionDef for __inference_cond_false_31_70
    in the registry" on a segmentation pipeline's decode). tf.data keeps the traced function
    in the map dataset's `_map_func`.

    Each is added even when the context has it: the context counts references by name, and
    a function another owner registered is removed when that owner is collected. Beside
    two CPU hogs a branch went before the serialization ("Unable to find FunctionDef for
    __inference_cond_false_..."); which owner held it then is inferred, not seen. The added
    reference is never dropped: a few FunctionDefs per rewrite, for the process's life."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    traced = getattr(getattr(mapped, "_map_func", None), "function", None)
    if traced is None:
        return
    ctx = context.context()
    for fdef in traced.graph.as_graph_def().library.function:
        try:
            ctx.add_function_def(fdef)
        except tf.errors.InvalidArgumentError:
            pass  # another definition under this name: the context keeps that one's owner


def _as_tensors(*parts: Any) -> tuple[Any, ...]:
    import tensorflow as tf

    return tuple(tf.identity(p) for p in parts)


def parse_per_batch(
    graph: lint.DatasetGraph, ds: tf.data.Dataset, records: int = RECORDS_PER_BATCH
) -> tf.data.Dataset | None:
    """`ds` with its first parse site (parse_sites) parsed per batch of `records`, then
    unbatched (see the module's docstring); None when there is no site. Raises Refused (why)
    when the site's function cannot be cut at its parse."""
    import tensorflow as tf

    sites = parse_sites(graph)
    if not sites:
        return None
    st = sites[0]
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    node = nodes[st.name]
    cut = _cut(g, node)
    # Built on a stand-in source of one record, then copied in after the map's input.
    stand_in = tf.data.Dataset.from_tensors(tf.constant(b""))
    chain = stand_in.batch(records).map(_batched_parse(cut), num_parallel_calls=tf.data.AUTOTUNE)
    _register(chain)
    # After the unbatch a row of a ragged batch is a variant; the map after it makes it the
    # tensor the map's consumers read (in direct mode that is all it does).
    after = _rest(cut) if cut.direct is None else _as_tensors
    chain = chain.unbatch().map(after, num_parallel_calls=tf.data.AUTOTUNE)
    _register(chain)
    got = splice.import_dataset(g, chain, f"{st.name}/tfperf_parse_batched")
    batch = next(n for op in BATCH_OPS for n in got.get(op, []))
    last = got["ParallelMapDatasetV2"][-1]
    key = "output_types" if "output_types" in node.attr else "Toutput_types"
    if list(last.attr["output_types"].list.type) != list(node.attr[key].list.type):
        raise Refused("the rebuilt map yields other types than the map")
    batch.input[0] = node.input[0]
    splice.redirect(g, node.name, last.name, skip=(last.name,))
    out = splice.rebuild(g, ds.element_spec)
    out.doctor_note = f"{st.label}: parsed {records} records per call, then unbatched"
    return out
