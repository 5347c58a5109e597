"""The doctor's rule for arrays held in the pipeline's graph: from_tensor_slices of large numpy
arrays (typically built by a Python loop before training) embeds them as graph constants. It
reads the graph only; registry.py runs it with the others."""

from __future__ import annotations

from typing import Any

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.generator_sample import feature_names
from tfperf.doctor.rules.registry import rule

LARGE_ARRAY_BYTES = 256 * 2**20  # arrays this large in the graph get the finding
GRAPH_LIMIT = "2 GiB"  # the largest constant TensorFlow serializes (protobuf's limit)


def array_constants(graph: lint.DatasetGraph) -> tuple[lint.GraphStage, list[Any]] | None:
    """(the from_tensor_slices source, its Const tensors' protos) of the pipeline."""
    source = graph.stages[0] if graph.stages else None
    if source is None or source.op not in ("TensorSliceDataset", "TensorDataset"):
        return None
    nodes = {n.name: n for n in graph.graph_def.node}
    node = nodes[source.name]
    consts = [nodes.get(i.split(":")[0]) for i in node.input if not i.startswith("^")]
    return source, [c.attr["value"].tensor for c in consts if c is not None and c.op == "Const"]


def _nbytes(tensor: Any) -> int:
    import tensorflow as tf

    count = 1
    for d in tensor.tensor_shape.dim:
        count *= d.size
    dtype = tf.dtypes.as_dtype(tensor.dtype)
    return count * (dtype.size if dtype != tf.string else 8)  # strings: at least a pointer


@rule("large_array", "data", 190)
def rule_large_array(ctx: Evidence) -> list[Finding]:
    """from_tensor_slices over LARGE_ARRAY_BYTES or more: the arrays live in the graph (a
    copy beside the numpy ones, refused past 2 GiB), and the loop that built them runs at
    every start."""
    found = array_constants(ctx.graph)
    if found is None:
        return []
    source, tensors = found
    total = sum(_nbytes(t) for t in tensors)
    if total < LARGE_ARRAY_BYTES:
        return []
    names = feature_names(len(tensors))
    shapes = ", ".join(
        f"{n}: {[d.size for d in t.tensor_shape.dim]}" for n, t in zip(names, tensors, strict=True)
    )
    arrays = ", ".join(f"{n}={n.upper()}" for n in names)
    label = f", data.label: {names[-1]}" if len(names) > 1 else ""
    return [
        Finding(
            "large_array",
            "large numpy arrays held in the pipeline's graph (from_tensor_slices)",
            source.label,
            f"{source.label} embeds {total / 2**20:,.0f} MiB of arrays as graph constants "
            f"({shapes}): a second copy beside the numpy arrays, copied again each time the "
            f"graph is serialized; TensorFlow refuses a constant over {GRAPH_LIMIT}",
            f"write the arrays once, outside the training script: numpy.savez('data.npz', "
            f"{arrays}) ({', '.join(n.upper() for n in names)}: the arrays given to "
            "from_tensor_slices), then `tfperf convert data.npz --out data/arrays`, and read "
            f"the shards with tfperf's pipeline (data.dir: data/arrays{label} in the run "
            "file): they are streamed from disk, and the Python loop that built the arrays "
            "runs once instead of at every start",
            "the arrays' RAM freed (no graph copy); no 2 GiB limit; start-up without the loop",
            None,
            "data",
            source.index,
        )
    ]
