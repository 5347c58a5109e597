"""Examples cut one at a time from arrays held in the graph, batched by one gather per batch
instead: the windows of `keras.utils.timeseries_dataset_from_array` (a `from_tensors(array)
.repeat()` zipped with each window's indices, one gather map per window) and the rows of
`from_tensor_slices` of in-memory arrays, each followed (through shuffles and prefetches) by
a batch. The rewrite batches the example numbers instead, `range(n) -> (the same shuffles)
-> batch`, and cuts each batch with one gather per array:
`tf.gather(array, starts[k][:, None] + tf.range(seq_len) * rate)` for windows, the rows
`tf.gather(array, k)` for slices. The shuffles keep their buffers and seeds, so example k
comes where it came; what follows the batch is untouched. Rows of from_tensor_slices of a
few arrays are not offered: slicing them and batching the slices measured 0.7-1.5x of one
gather per batch (tf.data's batch copies slices fast); rows of many arrays (a DataFrame's
columns) are, and a window, a gather map of its own per example, measured 13x.

The windows' indices are read once from the graph's own index dataset (every window's
start, its length and step checked over all of them), not from Keras' code, so strides,
sampling rates and start/end indices all carry over. The rewritten dataset carries
`doctor_check`: the old and new batches without their shuffles, for fix/'s multiset check
(a shuffled pipeline cannot be compared whole). Nothing is timed here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites import splice

if TYPE_CHECKING:
    import tensorflow as tf

MAP_OPS = frozenset({"MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2"})
# Rows of from_tensor_slices are offered from this many arrays on (a DataFrame's columns as a
# dict): each example is that many small tensors, which batch slowly (16 columns: the gather
# per batch measured 4.1x); with fewer, slicing and batching measured 0.7-1.5x of it.
MANY_COLUMNS = 4
BATCH_OPS = frozenset({"BatchDataset", "BatchDatasetV2", "ParallelBatchDataset"})
# Stages between the examples and their batch that the rewrite keeps (shuffles, options) or
# drops (a prefetch of example numbers buys nothing).
PASS_OPS = splice.SHUFFLE_OPS | {
    "PrefetchDataset",
    "OptionsDataset",
    "ModelDataset",
    "MaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset",
}
_GATHER_BODY = frozenset({"GatherV2", "Const", "Identity", "NoOp"})
# Index elements read into memory at most (a window's indices when they are no arithmetic
# progression, kept whole): 16 M ints.
MAX_INDEX_ELEMENTS = 1 << 24
_READ_BATCH = 8192


@dataclass
class Column:
    """One component of the examples: rows of the Const `array`, at the example number
    itself (`index` None: a slice) or at what the index dataset `index` yields for it."""

    array: str  # Const node name
    index: str | None = None  # dataset node name


@dataclass
class Site:
    """Where examples are cut one at a time from arrays: the stage that yields them, the
    stages up to their batch and the batch."""

    source: lint.GraphStage
    passes: list[lint.GraphStage]
    batch: lint.GraphStage
    columns: list[Column] = field(default_factory=list)

    @property
    def windows(self) -> bool:
        return any(c.index is not None for c in self.columns)

    @property
    def stages(self) -> list[lint.GraphStage]:
        """The stages whose per-example work the rewrite replaces, source to batch."""
        return [self.source, *self.passes, self.batch]


def find_site(graph: lint.DatasetGraph) -> Site | None:
    """The first batch whose examples are windows cut one at a time from in-memory arrays
    (None: there is none; rows of from_tensor_slices alone do not count, module docstring).
    Reads the graph only."""
    stages = graph.stages
    batch = next((s for s in stages if s.kind in ("batch", "map_batch")), None)
    if batch is None or batch.op not in BATCH_OPS or batch.index == 0:
        return None
    j = batch.index
    while j > 0 and stages[j - 1].op in PASS_OPS:
        j -= 1
    if j == 0:
        return None
    nodes = {n.name: n for n in graph.graph_def.node}
    library = {f.signature.name: f for f in graph.graph_def.library.function}
    columns = _columns(nodes, library, stages[j - 1].name)
    if not columns or (all(c.index is None for c in columns) and len(columns) < MANY_COLUMNS):
        return None  # rows of a few arrays of from_tensor_slices: no gain worth a trial
    return Site(stages[j - 1], list(stages[j : batch.index]), batch, columns)


def _data(node: Any) -> list[str]:
    return [i for i in node.input if not i.startswith("^")]


def _columns(nodes: dict[str, Any], library: dict[str, Any], name: str) -> list[Column] | None:
    node = nodes.get(name.split(":")[0])
    if node is None:
        return None
    if node.op == "TensorSliceDataset":
        refs = _data(node)
        if refs and all(_is_const(nodes, r) for r in refs):
            return [Column(r) for r in refs]
        return None
    if node.op == "ZipDataset":
        out: list[Column] = []
        for ref in _data(node):
            part = _columns(nodes, library, ref)
            if part is None:
                return None
            out += part
        return out
    if node.op in MAP_OPS and not node.attr["Targuments"].list.type:
        args = _gather_args(library.get(node.attr["f"].func.name))
        zipped = nodes.get(_data(node)[0].split(":")[0])
        if args is None or zipped is None or zipped.op != "ZipDataset":
            return None
        refs = _data(zipped)
        if len(refs) != 2:
            return None
        array = _repeated_const(nodes, refs[args[0]])
        return None if array is None else [Column(array, refs[args[1]])]
    return None


def _is_const(nodes: dict[str, Any], ref: str) -> bool:
    node = nodes.get(ref.split(":")[0].lstrip("^"))
    return node is not None and node.op == "Const"


def _repeated_const(nodes: dict[str, Any], ref: str) -> str | None:
    """The Const of `from_tensors(const).repeat()` (endlessly), else None."""
    rep = nodes.get(ref.split(":")[0])
    if rep is None or rep.op != "RepeatDataset":
        return None
    count = lint.const_value(nodes, _data(rep)[1])
    src = nodes.get(_data(rep)[0].split(":")[0])
    if count is None or int(count) >= 0 or src is None or src.op != "TensorDataset":
        return None
    refs = _data(src)
    return refs[0] if len(refs) == 1 and _is_const(nodes, refs[0]) else None


def _gather_args(fdef: Any) -> tuple[int, int] | None:
    """(params, indices) argument positions when the function is `tf.gather(a, b)` of its
    two arguments along axis 0 and returns that alone; None otherwise."""
    if fdef is None or len(fdef.signature.input_arg) != 2 or len(fdef.ret) != 1:
        return None
    if any(nd.op not in _GATHER_BODY for nd in fdef.node_def):
        return None
    gathers = [nd for nd in fdef.node_def if nd.op == "GatherV2"]
    if len(gathers) != 1 or gathers[0].attr["batch_dims"].i != 0:
        return None
    g = gathers[0]
    args = [a.name for a in fdef.signature.input_arg]
    params, indices, axis = (ref.split(":")[0] for ref in g.input[:3])
    consts = {nd.name: nd for nd in fdef.node_def if nd.op == "Const"}
    if params not in args or indices not in args or params == indices or axis not in consts:
        return None
    from tensorflow.python.framework import tensor_util

    if int(tensor_util.MakeNdarray(consts[axis].attr["value"].tensor)) != 0:
        return None
    # What the function returns: the gather, or an Identity of it.
    ret = next(iter(fdef.ret.values())).split(":")[0]
    by_name = {nd.name: nd for nd in fdef.node_def}
    while ret in by_name and by_name[ret].op == "Identity":
        ret = by_name[ret].input[0].split(":")[0]
    if ret != g.name:
        return None
    return args.index(params), args.index(indices)


# ---- the rewrite ---------------------------------------------------------------------------
@dataclass
class _Index:
    """How example k finds its rows of one array: k itself (kind "rows"), `values[k]`
    ("scalar"), `starts[k] + range(length) * step` ("window"), or `values[k]` whole rows
    of indices ("matrix")."""

    kind: str
    values: Any = None
    length: int = 0
    step: int = 1


def _read_index(ds: tf.data.Dataset) -> tuple[_Index, int] | None:
    """The indices an index dataset yields for every example, read once in batches: (how
    each example finds its rows, how many examples); None when they cannot be read."""
    import numpy as np
    import tensorflow as tf

    n = lint.known_cardinality(ds)
    spec = ds.element_spec
    if n is None or not isinstance(spec, tf.TensorSpec) or spec.shape.rank not in (0, 1):
        return None
    if not spec.dtype.is_integer:
        return None
    parts, starts, step, arithmetic = [], [], None, True
    kept = 0
    try:
        for block in ds.batch(_READ_BATCH):
            arr = block.numpy()
            if arr.ndim == 1:
                parts.append(arr)
                continue
            width = arr.shape[1]
            if width == 0:
                return None
            starts.append(arr[:, 0])
            if width > 1:
                step = int(arr[0, 1] - arr[0, 0]) if step is None else step
                expect = arr[:, :1] + np.arange(width, dtype=arr.dtype) * step
                arithmetic = arithmetic and bool((arr == expect).all())
            kept += arr.size
            if kept <= MAX_INDEX_ELEMENTS:
                parts.append(arr)
            elif not arithmetic:
                return None
    except tf.errors.OpError:  # e.g. windows of different lengths cannot be batched
        return None
    if spec.shape.rank == 0:
        values = np.concatenate(parts) if parts else np.zeros([0], spec.dtype.as_numpy_dtype)
        return _Index("scalar", values), n
    if not starts:
        return None
    width = parts[0].shape[1] if parts else 0
    if arithmetic:
        return _Index("window", np.concatenate(starts), width, step or 1), n
    return _Index("matrix", np.concatenate(parts)), n


def _gather_function(arrays: list[Any], indexes: list[_Index]) -> Any:
    """fn(k: int64 [batch]) -> each array's rows for examples k, as a tuple."""
    import tensorflow as tf

    # Captured (the map's other arguments), not constants of the function's body: a string
    # constant in a function body measured 3x slower per call.
    captured = [tf.constant(a) for a in arrays]
    positions = [None if i.kind == "rows" else tf.constant(i.values) for i in indexes]

    def fn(k: Any) -> Any:
        outs = []
        for values, index, where in zip(captured, indexes, positions, strict=True):
            if where is None:
                outs.append(tf.gather(values, k))
                continue
            at = tf.gather(where, k)
            if index.kind == "window":
                steps = tf.range(index.length, dtype=at.dtype) * tf.cast(index.step, at.dtype)
                at = at[:, None] + steps[None, :]
            outs.append(tf.gather(values, at))
        return tuple(outs)

    return fn


def batched_gather(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """`ds` with its examples cut by one gather per batch (module docstring); None when
    no batch's examples are cut one at a time from in-memory arrays, or their indices
    cannot be read."""
    import tensorflow as tf

    site = find_site(graph)
    if site is None:
        return None
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    arrays, indexes, counts = [], [], []
    for col in site.columns:
        array = splice.const_array(nodes, col.array)
        if array is None or array.ndim == 0:
            return None
        arrays.append(array)
        if col.index is None:
            indexes.append(_Index("rows"))
            counts.append(len(array))
            continue
        read = _read_index(splice.node_dataset(graph.graph_def, col.index.split(":")[0]))
        if read is None:
            return None
        indexes.append(read[0])
        counts.append(read[1])
    n = min(counts)  # a zip ends with its shortest input
    batch_node = nodes[site.batch.name]
    drop = lint.const_value(nodes, _data(batch_node)[-1])
    drop = bool(drop) if drop is not None and batch_node.op != "BatchDataset" else False
    probe = tf.data.Dataset.range(n).batch(site.batch.batch_size or 1, drop_remainder=drop)
    probe = probe.map(_gather_function(arrays, indexes), num_parallel_calls=tf.data.AUTOTUNE)
    got = splice.import_dataset(g, probe, f"{site.batch.name}/tfperf_gather")
    source, cut = got["RangeDataset"][0], got["ParallelMapDatasetV2"][0]
    key = "output_types" if "output_types" in batch_node.attr else "Toutput_types"
    if list(cut.attr["output_types"].list.type) != list(batch_node.attr[key].list.type):
        return None
    # range(n) -> the shuffles and options that were there -> the batch -> the gathers.
    kept = [nodes[s.name] for s in site.passes if s.kind != "prefetch"]
    prev = source.name
    for node in [*kept, batch_node]:
        node.input[0] = prev
        prev = node.name
    int64 = tf.int64.as_datatype_enum
    for node in kept:
        splice.retype(node, [int64], [splice.scalar_shape()])
    lead = site.batch.batch_size if drop and site.batch.batch_size else -1
    splice.retype(batch_node, [int64], [splice.scalar_shape(lead)])
    splice.redirect(g, batch_node.name, cut.name, skip=(cut.name,))
    cut.input[0] = batch_node.name
    out = splice.rebuild(g, ds.element_spec)
    old = splice.node_dataset(splice.unshuffled(graph.graph_def), site.batch.name)
    new = splice.node_dataset(splice.unshuffled(g), cut.name)
    out.doctor_check = (old, new)
    # One phrase per way of cutting, with its count of arrays (a DataFrame has dozens).
    ways = [_described(i) for i in indexes]
    said = [
        w if ways.count(w) == 1 else f"{ways.count(w)} arrays: {w}" for w in dict.fromkeys(ways)
    ]
    out.doctor_note = f"{n:,} examples cut by one gather per batch: " + ", ".join(said)
    return out


def _described(index: _Index) -> str:
    """How one array is cut, for the trial's note: what really applied."""
    if index.kind == "window":
        return f"windows of {index.length} rows, step {index.step}"
    if index.kind == "matrix":
        return "windows at their own indices"
    return "one row each"
