"""Static reading of a tf.data pipeline: the dataset's serialized graph (GraphDef) walked
from source to output as a chain of stages, each with its settings (parallelism, batch
size, buffer sizes, determinism, dtypes) and the ops inside its functions.

It times nothing and judges nothing: lint.py asks questions of the chain, diagnosis/ times
its prefixes, rules/ decide. One job (reading the graph), with the op table it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

# Short kinds for the dataset ops the rules care about; unknown ops are "other".
_OPS_BY_KIND = {
    "source": ("TensorSliceDataset", "TensorDataset", "RangeDataset", "SparseTensorSliceDataset"),
    "read": (
        "FixedLengthRecordDatasetV2",
        "TFRecordDataset",
        "TFRecordDatasetV2",
        "TextLineDataset",
    ),
    "generator": ("GeneratorDataset",),
    "map": ("MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2"),
    "map_batch": ("MapAndBatchDataset",),
    "batch": (
        "BatchDataset",
        "BatchDatasetV2",
        "ParallelBatchDataset",
        "PaddedBatchDataset",
        "PaddedBatchDatasetV2",
    ),
    "shuffle": (
        "ShuffleDataset",
        "ShuffleDatasetV2",
        "ShuffleDatasetV3",
        "ShuffleAndRepeatDataset",
        "ShuffleAndRepeatDatasetV2",
    ),
    "repeat": ("RepeatDataset",),
    "prefetch": ("PrefetchDataset",),
    "cache": ("CacheDataset", "CacheDatasetV2"),
    "interleave": (
        "InterleaveDataset",
        "ParallelInterleaveDataset",
        "ParallelInterleaveDatasetV2",
        "ParallelInterleaveDatasetV3",
        "ParallelInterleaveDatasetV4",
    ),
    "flat_map": ("FlatMapDataset",),
    "parse": ("ParseExampleDataset", "ParseExampleDatasetV2"),
    "filter": ("FilterDataset",),
    "take": ("TakeDataset",),
    "skip": ("SkipDataset",),
    "shard": ("ShardDataset",),
    "unbatch": ("UnbatchDataset",),
    # Pass-through wrappers: options, autotune model, thread pools.
    "options": (
        "OptionsDataset",
        "ModelDataset",
        "MaxIntraOpParallelismDataset",
        "PrivateThreadPoolDataset",
        "AssertCardinalityDataset",
        "IgnoreErrorsDataset",
    ),
}
_KINDS = {op: kind for kind, ops in _OPS_BY_KIND.items() for op in ops}
# Ops that call back into Python (the distance-maps workload's original ran in one of these).
PY_FUNC_OPS = frozenset({"PyFunc", "EagerPyFunc", "PyFuncStateless"})
# The datasets a flat_map's function may return built from tensors it computes: slices of
# them (from_tensor_slices: the flat_map splits what it makes, as an unbatch does) or each
# whole (from_tensors).
TENSOR_SOURCES = ("TensorSliceDataset", "TensorDataset")
PARSE_OPS = frozenset({"ParseExampleV2", "ParseExample", "ParseSingleExample"})
READ_OPS = frozenset(_OPS_BY_KIND["read"])
AUTOTUNE = -1


def _tuned(value: int) -> str:
    return "AUTOTUNE" if value == AUTOTUNE else str(value)


def _is_dataset_op(op: str) -> bool:
    return op in _KINDS or "Dataset" in op


def _is_random_op(op: str) -> bool:
    # Content that differs between epochs cannot be cached (augmentation).
    return "Random" in op or op.startswith("Rng") or op in _RANDOM_OPS


# Random ops whose names do not say so: an Inception-style crop box, a truncated normal draw.
_RANDOM_OPS = frozenset(
    {
        "Multinomial",
        "RandomShuffle",
        "SampleDistortedBoundingBox",
        "SampleDistortedBoundingBoxV2",
        "TruncatedNormal",
        "ParameterizedTruncatedNormal",
    }
)


@dataclass
class GraphStage:
    """One dataset op of the main chain, source first."""

    index: int
    name: str  # node name in the GraphDef
    op: str
    kind: str
    parallelism: int | None = None  # num_parallel_calls; -1 is AUTOTUNE; None: sequential
    deterministic: str | None = None  # "true", "false" or "default" (follows Options)
    batch_size: int | None = None
    buffer_size: int | None = None
    drop_remainder: bool | None = None
    functions: list[str] = field(default_factory=list)
    fn_ops: set[str] = field(default_factory=set)  # every op inside its functions, nested
    output_dtypes: list[str] = field(default_factory=list)
    output_shapes: list[list[int | None] | None] = field(default_factory=list)
    files: int | None = None  # files read by a read stage, when known
    batched: bool = False  # a batch stage is at or before this one
    # A flat_map whose function returns a dataset of the tensors it computes: that dataset's
    # op (one of TENSOR_SOURCES); None otherwise.
    tensor_source: str | None = None
    # The stage's element spec, read from the Python dataset that made it, when its outputs
    # hold variants (ragged or sparse tensors): the graph records only their flat tensors.
    element_spec: Any = None

    @property
    def composite(self) -> bool:
        """Its elements hold variant tensors: ragged or sparse components (or datasets)."""
        return "variant" in self.output_dtypes

    @property
    def padded(self) -> bool:
        """A padded_batch: it pads each example to the batch's longest."""
        return self.op.startswith("PaddedBatch")

    @property
    def has_py_func(self) -> bool:
        return bool(self.fn_ops & PY_FUNC_OPS)

    @property
    def has_parse(self) -> bool:
        return bool(self.fn_ops & PARSE_OPS) or self.kind == "parse"

    @property
    def is_generator(self) -> bool:
        return self.kind == "generator" or "GeneratorDataset" in self.fn_ops

    @property
    def reads_files(self) -> bool:
        return self.kind == "read" or bool(self.fn_ops & READ_OPS)

    @property
    def is_random(self) -> bool:
        return self.kind == "shuffle" or any(_is_random_op(op) for op in self.fn_ops)

    @property
    def parallel(self) -> bool:
        return self.parallelism is not None and self.parallelism != 1

    @property
    def label(self) -> str:
        """A short human name: 'map#3 (parallel=AUTOTUNE)'."""
        extra = []
        if self.kind in ("map", "interleave", "map_batch", "batch", "parse"):
            if self.parallelism is None:
                extra.append("sequential" if self.kind != "batch" else "")
            else:
                extra.append(f"parallel={_tuned(self.parallelism)}")
        if self.batch_size is not None:
            extra.append(f"batch={self.batch_size}")
        if self.buffer_size is not None:
            extra.append(f"buffer={_tuned(self.buffer_size)}")
        if self.files is not None:
            extra.append(f"files={self.files}")
        if self.has_py_func and not self.is_generator:
            extra.append("py_function")
        inner = ", ".join(e for e in extra if e)
        return f"{self.kind}#{self.index}" + (f" ({inner})" if inner else "")

    def summary(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "op": self.op,
            "kind": self.kind,
            "label": self.label,
            "parallelism": self.parallelism,
            "deterministic": self.deterministic,
            "batch_size": self.batch_size,
            "buffer_size": self.buffer_size,
            "files": self.files,
            "output_dtypes": self.output_dtypes,
            "functions": self.functions,
        }


@dataclass
class DatasetGraph:
    """A dataset's graph and its main chain of stages (source first, output last)."""

    graph_def: Any
    stages: list[GraphStage]
    element_spec: Any
    deterministic_option: bool | None  # tf.data.Options().deterministic of the dataset

    @property
    def output(self) -> GraphStage:
        return self.stages[-1]

    @property
    def batch_size(self) -> int | None:
        for s in self.stages:
            if s.batch_size is not None and s.kind in ("batch", "map_batch"):
                return s.batch_size
        return None

    def measurable(self) -> list[GraphStage]:
        """Stages whose prefix is worth timing (pass-through wrappers are skipped)."""
        return [s for s in self.stages if s.kind not in ("options", "take", "skip")]

    def in_blocks(self, stage: GraphStage) -> bool:
        """Whether `stage` yields blocks of examples that a later unbatch splits (records
        read in blocks inside an interleave, say), not single examples nor batches: each of
        its elements holds many examples."""
        if stage.batched:
            return False  # batches: their rows are examples already
        if not stage.output_shapes or not all(stage.output_shapes):
            return False  # a scalar (or unknown rank) cannot be split by rows
        for later in self.stages[stage.index + 1 :]:
            if later.kind in ("batch", "map_batch"):
                return False
            if later.kind == "unbatch":
                return True
        return False


def const_value(nodes: dict[str, Any], ref: str) -> Any:
    # TensorFlow is imported on first use so that `import tfperf.doctor` stays fast.
    from tensorflow.python.framework import tensor_util

    node = nodes.get(ref.split(":")[0].lstrip("^"))
    if node is None or node.op != "Const":
        return None
    value = tensor_util.MakeNdarray(node.attr["value"].tensor)
    return value


def _int_input(nodes: dict[str, Any], node: Any, pos: int) -> int | None:
    if len(node.input) <= abs(pos) - (1 if pos < 0 else 0) or not node.input:
        return None
    try:
        value = const_value(nodes, node.input[pos])
    except IndexError:
        return None
    if value is None or getattr(value, "size", 1) != 1:
        return None
    return int(value)


def _function_ops(library: dict[str, Any], names: list[str]) -> set[str]:
    """Every op inside the named functions, following nested function attributes."""
    seen: set[str] = set()
    ops: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        for nd in library[name].node_def:
            ops.add(nd.op)
            for value in nd.attr.values():
                if value.func.name:
                    todo.append(value.func.name)
                for f in value.list.func:
                    todo.append(f.name)
    return ops


def _node_functions(node: Any) -> list[str]:
    names = []
    for value in node.attr.values():
        if value.func.name:
            names.append(value.func.name)
        names.extend(f.name for f in value.list.func)
    return names


def _shapes(node: Any) -> list[list[int | None] | None]:
    out: list[list[int | None] | None] = []
    for s in node.attr["output_shapes"].list.shape:
        out.append(None if s.unknown_rank else [None if d.size < 0 else d.size for d in s.dim])
    return out


def _dtypes(node: Any) -> list[str]:
    import tensorflow as tf

    key = "output_types" if "output_types" in node.attr else "Toutput_types"
    return [tf.dtypes.as_dtype(t).name for t in node.attr[key].list.type]


def _const_size(nodes: dict[str, Any], ref: str) -> int | None:
    """Number of elements of a Const input (from its shape: string values need no decoding)."""
    node = nodes.get(ref.split(":")[0].lstrip("^"))
    if node is None or node.op != "Const":
        return None
    size = 1
    for d in node.attr["value"].tensor.tensor_shape.dim:
        size *= d.size
    return size


def _files_of(nodes: dict[str, Any], node: Any) -> int | None:
    """How many files a read stage (or the file list feeding a flat_map/interleave) holds."""
    src = nodes.get(node.input[0].split(":")[0]) if node.input else None
    if node.op in READ_OPS:
        return _const_size(nodes, node.input[0])
    if src is not None and src.op == "TensorSliceDataset" and src.input:
        return _const_size(nodes, src.input[0])
    return None


def returned_source(fn: Any) -> Any | None:
    """The node of TENSOR_SOURCES a (flat_map's) function returns, through Identity nodes;
    None when it returns anything else (or `fn` is None)."""
    if fn is None or len(fn.signature.output_arg) != 1:
        return None
    body = {n.name: n for n in fn.node_def}
    name = fn.ret[fn.signature.output_arg[0].name].split(":")[0]
    while name in body and body[name].op == "Identity":
        name = body[name].input[0].lstrip("^").split(":")[0]
    node = body.get(name)
    return node if node is not None and node.op in TENSOR_SOURCES else None


def _stage(nodes: dict[str, Any], library: dict[str, Any], node: Any, index: int) -> GraphStage:
    kind = _KINDS.get(node.op, "other")
    st = GraphStage(index=index, name=node.name, op=node.op, kind=kind)
    st.functions = _node_functions(node)
    st.fn_ops = _function_ops(library, st.functions)
    if node.op == "FlatMapDataset" and st.functions:
        source = returned_source(library.get(st.functions[0]))
        st.tensor_source = source.op if source is not None else None
    st.output_dtypes = _dtypes(node)
    st.output_shapes = _shapes(node)
    if "deterministic" in node.attr:
        st.deterministic = node.attr["deterministic"].s.decode() or "default"
    op = node.op
    if op in ("ParallelMapDataset", "ParallelMapDatasetV2") or op.startswith(
        "ParallelInterleaveDataset"
    ):
        st.parallelism = _int_input(nodes, node, -1)
    elif op == "MapAndBatchDataset":
        st.parallelism = _int_input(nodes, node, -2)
        st.batch_size = _int_input(nodes, node, -3)
    elif op == "ParallelBatchDataset":
        st.batch_size = _int_input(nodes, node, 1)
        st.parallelism = _int_input(nodes, node, 2)
    elif kind == "batch":
        st.batch_size = _int_input(nodes, node, 1)
    elif kind == "parse":
        st.parallelism = _int_input(nodes, node, 1)
    if kind in ("shuffle", "prefetch"):
        st.buffer_size = _int_input(nodes, node, 1)
    if kind == "read" or (kind in ("flat_map", "interleave") and st.fn_ops & READ_OPS):
        st.files = _files_of(nodes, node)
    return st


def read_graph(ds: tf.data.Dataset) -> DatasetGraph:
    """The chain of stages of `ds` (any tf.data.Dataset), source first."""
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    policy = tf.data.experimental.ExternalStatePolicy.IGNORE  # py_functions serialize as tokens
    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString(ds._as_serialized_graph(external_state_policy=policy).numpy())
    nodes = {n.name: n for n in graph_def.node}
    library = {f.signature.name: f for f in graph_def.library.function}
    ret = next(n for n in graph_def.node if n.op == "_Retval")
    chain = []
    node = nodes[ret.input[0].split(":")[0]]
    # Follow each op's first input (its input dataset) back to the source.
    while True:
        chain.append(node)
        if not node.input or node.op in _KINDS and _KINDS[node.op] in ("source", "read"):
            break
        parent = nodes.get(node.input[0].split(":")[0].lstrip("^"))
        if parent is None or not _is_dataset_op(parent.op):
            break
        node = parent
    chain.reverse()
    stages = [_stage(nodes, library, n, i) for i, n in enumerate(chain)]
    batched = False
    for st in stages:
        batched = batched or st.kind in ("batch", "map_batch")
        if st.kind == "unbatch" or st.tensor_source == "TensorSliceDataset":
            batched = False
        st.batched = batched
    if any(st.composite for st in stages):
        _composite_specs(ds, stages)
    return DatasetGraph(graph_def, stages, ds.element_spec, ds.options().deterministic)


def _python_chain(ds: tf.data.Dataset) -> list[Any]:
    """The Python datasets behind `ds`, source first, following each one's first input as
    the graph's chain does; those that reuse their input's graph node (a restructuring)
    are left out, so that each stands for one dataset op."""
    chain: list[Any] = []
    node: Any = ds
    while node is not None:
        inputs = node._inputs() if hasattr(node, "_inputs") else []
        parent = inputs[0] if inputs else None
        same_op = parent is not None and node._variant_tensor is parent._variant_tensor
        if not same_op:
            chain.append(node)
        node = parent
    chain.reverse()
    return chain


def _flat_dtypes(spec: Any) -> list[str]:
    from tensorflow.python.data.util import structure

    return [s.dtype.name for s in structure.get_flat_tensor_specs(spec)]


def _composite_specs(ds: tf.data.Dataset, stages: list[GraphStage]) -> None:
    """Sets the element spec of the stages whose outputs hold ragged or sparse tensors: from
    the Python dataset of each stage when the two chains pair one to one (same length, same
    flat dtypes), else from the output's spec carried back through the stages that keep
    their input's elements (shuffle, prefetch, cache...). A stage left without one yields
    its flat tensors (variants) when cut: see lint.prefix_dataset."""
    try:
        chain = _python_chain(ds)
        paired = len(chain) == len(stages) and all(
            _flat_dtypes(p.element_spec) == st.output_dtypes
            for p, st in zip(chain, stages, strict=True)
        )
    except Exception:  # noqa: BLE001 - a dataset class without the private API: no pairing
        paired = False
    if paired:
        for p, st in zip(chain, stages, strict=True):
            if st.composite and _tensors_only(p.element_spec):
                st.element_spec = p.element_spec
        return
    for st in reversed(stages):
        same = _flat_dtypes(ds.element_spec) == st.output_dtypes
        if st.composite and same and _tensors_only(ds.element_spec):
            st.element_spec = ds.element_spec
        if st.kind not in _SAME_ELEMENTS:
            break


def _tensors_only(spec: Any) -> bool:
    """Whether every component is a tensor, ragged or sparse: elements that hold datasets
    (window, group_by_window) stay flat variants, as the probes that pull them expect."""
    import tensorflow as tf

    kinds = (tf.TensorSpec, tf.RaggedTensorSpec, tf.SparseTensorSpec)
    return all(isinstance(s, kinds) for s in tf.nest.flatten(spec))


# Stages whose elements are their input's, structure and all: a spec carries through them.
_SAME_ELEMENTS = frozenset(
    {"shuffle", "repeat", "prefetch", "cache", "options", "take", "skip", "shard", "filter"}
)
