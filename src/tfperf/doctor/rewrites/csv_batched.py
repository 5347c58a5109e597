"""CSV read as lines and decoded per batch: `tf.data.experimental.make_csv_dataset` (a
CsvDataset per file inside an interleave, then shuffle, repeat, batch and the dict) and a
plain `CsvDataset` parse each row on its own. The rewrite reads each file's lines
(TextLineDataset, its header skipped), keeps every stage up to the batch (the shuffles with
their buffers and seeds, the repeat, the file interleave's settings) on the lines, and after
the batch decodes the whole batch with one `tf.io.decode_csv` of the same record defaults,
delimiter, quoting, NA value and selected columns: the batch yields what it yielded, and
what followed it (make_csv_dataset's dict) is untouched.

With `ignore_errors` (CsvDataset skips a bad row; decode_csv would fail its whole batch) the
files are decoded once, every line, and a file with a bad row is left as it is. The result
carries `doctor_check` (the old and new batches without shuffles, for fix/'s multiset
check). `csv_code` writes the same pipeline as code a user can paste. Nothing is timed here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites import splice

if TYPE_CHECKING:
    import tensorflow as tf

CSV_OPS = frozenset({"CSVDataset", "CSVDatasetV2"})
READS = frozenset(
    {
        "FlatMapDataset",
        "InterleaveDataset",
        "ParallelInterleaveDatasetV2",
        "ParallelInterleaveDatasetV3",
        "ParallelInterleaveDatasetV4",
        "LegacyParallelInterleaveDatasetV2",
    }
)
# Stages between the rows and their batch that stay, on lines.
PASS_OPS = splice.SHUFFLE_OPS | {
    "RepeatDataset",
    "PrefetchDataset",
    "OptionsDataset",
    "ModelDataset",
    "MaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset",
    "IgnoreErrorsDataset",
}
BATCH_OPS = frozenset({"BatchDataset", "BatchDatasetV2", "ParallelBatchDataset"})
# A file list decoded whole to check for bad rows only up to this size (ignore_errors).
MAX_CHECKED_BYTES = 512 * 2**20
_CHECK_BATCH = 4096


@dataclass
class CsvRead:
    """A CSV read found in the graph and everything decode_csv needs."""

    read: lint.GraphStage  # the stage that yields the rows (the interleave, or CSVDataset)
    passes: list[lint.GraphStage]
    batch: lint.GraphStage
    files: list[str]  # when the graph holds the file names as a constant
    compression: str
    buffer_size: int
    header: bool
    delim: str
    quote: bool
    na_value: str
    select_cols: list[int]
    defaults: list[Any] = field(default_factory=list)  # numpy arrays (shape [1] or [0])
    ignore_errors: bool = False


def _data(node: Any) -> list[str]:
    return [i for i in node.input if not i.startswith("^")]


def _value(fdef: Any, node: Any, nodes: dict[str, Any], ref: str) -> Any:
    """The value of input `ref` of the CSV op: a Const of the function, one of its
    captured arguments (the read node's Const input), or an outer Const."""
    import numpy as np
    import tensorflow as tf

    if fdef is None:
        return splice.const_array(nodes, ref)
    name = ref.split(":")[0]
    consts = {nd.name: nd for nd in fdef.node_def if nd.op == "Const"}
    if name in consts:
        proto = consts[name].attr["value"].tensor
        return np.asarray(tf.io.parse_tensor(proto.SerializeToString(), proto.dtype).numpy())
    args = [a.name for a in fdef.signature.input_arg]
    if name in args and args.index(name) >= 1:
        return splice.const_array(nodes, _data(node)[args.index(name)])
    return None


def find_csv(graph: lint.DatasetGraph) -> CsvRead | None:
    """The first CSV read whose rows reach a batch through shuffles, repeats, prefetches
    and options only, with every setting a constant (None: no such read)."""
    stages = graph.stages
    nodes = {n.name: n for n in graph.graph_def.node}
    library = {f.signature.name: f for f in graph.graph_def.library.function}
    for st in stages:
        node = nodes[st.name]
        fdef, csv, ignore = None, None, False
        if node.op in CSV_OPS:
            csv = node
        elif node.op in READS:
            fdef = library.get(node.attr["f"].func.name)
            body = {nd.op: nd for nd in fdef.node_def} if fdef is not None else {}
            csv = next((body[op] for op in CSV_OPS if op in body), None)
            ignore = "IgnoreErrorsDataset" in body
            if csv is not None and set(body) - CSV_OPS - _READ_BODY:
                csv = None  # more than a CSV file read per element
        if csv is None:
            continue
        j = st.index + 1
        while j < len(stages) and stages[j].op in PASS_OPS:
            j += 1
        if j >= len(stages) or stages[j].op not in BATCH_OPS:
            return None
        found = _settings(fdef, node, nodes, csv, st, stages[st.index + 1 : j], stages[j])
        if found is not None:
            found.ignore_errors = ignore or any(s.op == "IgnoreErrorsDataset" for s in found.passes)
        return found
    return None


# What the file-read function of make_csv_dataset holds besides the CSV op.
_READ_BODY = frozenset({"Const", "Identity", "NoOp", "IgnoreErrorsDataset"})


def _settings(
    fdef: Any,
    node: Any,
    nodes: dict[str, Any],
    csv: Any,
    read: lint.GraphStage,
    passes: list[lint.GraphStage],
    batch: lint.GraphStage,
) -> CsvRead | None:
    ins = _data(csv)
    n_defaults = len(csv.attr["output_types"].list.type)
    fixed = ins[:8]
    defaults = ins[8 : 8 + n_defaults]
    extra = ins[8 + n_defaults :]  # V2: exclude_cols
    values = [_value(fdef, node, nodes, r) for r in fixed + defaults + extra]
    if any(v is None for v in values[1:]):
        return None
    _, compression, buffer_size, header, delim, quote, na_value, select = values[:8]
    if extra and values[-1].size:
        return None  # exclude_cols: decode_csv has no such option
    files: list[str] = []
    if fdef is None and values[0] is not None:
        files = [f.decode() for f in values[0].ravel()]
    elif fdef is not None:
        src = nodes.get(_data(node)[0].split(":")[0])
        while src is not None and src.op in splice.SHUFFLE_OPS:  # list_files' shuffle
            src = nodes.get(_data(src)[0].split(":")[0])
        if src is not None and src.op == "TensorSliceDataset":
            names = splice.const_array(nodes, _data(src)[0])
            files = [f.decode() for f in names.ravel()] if names is not None else []
    return CsvRead(
        read,
        passes,
        batch,
        files,
        compression.item().decode(),
        int(buffer_size),
        bool(header),
        delim.item().decode(),
        bool(quote),
        na_value.item().decode(),
        [int(c) for c in select.ravel()],
        [values[8 + i] for i in range(n_defaults)],
    )


def _lines_of(found: CsvRead) -> Any:
    """fn(file name) -> the file's lines, its header skipped (the per-file read)."""
    import tensorflow as tf

    def lines(name: Any) -> Any:
        ds = tf.data.TextLineDataset(
            name, compression_type=found.compression, buffer_size=found.buffer_size
        )
        return ds.skip(1) if found.header else ds

    return lines


def _decoder(found: CsvRead) -> Any:
    """fn(lines [batch]) -> the CSV's columns for them, as a tuple (decode_csv)."""
    import tensorflow as tf

    defaults = [tf.constant(d) for d in found.defaults]

    def decode(lines: Any) -> Any:
        return tuple(
            tf.io.decode_csv(
                lines,
                record_defaults=defaults,
                field_delim=found.delim,
                use_quote_delim=found.quote,
                na_value=found.na_value,
                select_cols=found.select_cols or None,
            )
        )

    return decode


def _decodes_cleanly(found: CsvRead) -> bool:
    """Every line of the files decodes (make_csv_dataset's ignore_errors then skips none)."""
    import tensorflow as tf

    if not found.files:
        return False
    try:
        size = sum(tf.io.gfile.stat(f).length for f in found.files)
    except tf.errors.OpError:
        return False
    if size > MAX_CHECKED_BYTES:
        return False
    names = tf.data.Dataset.from_tensor_slices(found.files)
    lines = names.flat_map(_lines_of(found)).batch(_CHECK_BATCH)
    try:
        for _ in lines.map(_decoder(found)):
            pass
    except tf.errors.InvalidArgumentError:
        return False
    return True


def batched_csv(graph: lint.DatasetGraph, ds: tf.data.Dataset) -> tf.data.Dataset | None:
    """`ds` with its CSV read as lines and decoded per batch (module docstring); None when
    it reads no CSV this way, or a file has rows its ignore_errors would skip."""
    import tensorflow as tf

    found = find_csv(graph)
    if found is None or (found.ignore_errors and not _decodes_cleanly(found)):
        return None
    if splice.has_shuffle_and_repeat(graph.graph_def):
        return None  # no pass in order for the check
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    prefix = f"{found.read.name}/tfperf_csv"
    batch_node = nodes[found.batch.name]
    drop = lint.const_value(nodes, _data(batch_node)[-1])
    drop = bool(drop) if drop is not None and batch_node.op != "BatchDataset" else False
    lead = found.batch.batch_size if drop and found.batch.batch_size else -1
    string = tf.string.as_datatype_enum
    read = nodes[found.read.name]
    if read.op in CSV_OPS and not found.files:
        return None  # its file names are no constant
    probe = tf.data.Dataset.from_tensor_slices(tf.constant(found.files or [""]))
    probe = probe.flat_map(_lines_of(found)).batch(found.batch.batch_size or 1, drop)
    probe = probe.map(_decoder(found), num_parallel_calls=tf.data.AUTOTUNE)
    got = splice.import_dataset(g, probe, prefix)
    decode = got["ParallelMapDatasetV2"][0]
    key = "output_types" if "output_types" in batch_node.attr else "Toutput_types"
    if list(decode.attr["output_types"].list.type) != list(batch_node.attr[key].list.type):
        return None
    flat = got["FlatMapDataset"][0]
    if read.op in CSV_OPS:  # a CsvDataset of its own: the lines of its files instead
        splice.redirect(g, read.name, flat.name)
    elif _one_at_a_time(nodes, read):
        # One file at a time (make_csv_dataset's num_parallel_reads=1): a flat_map of the
        # files' lines, without the interleave's thread between each line and the next.
        flat.input[0] = _data(read)[0]
        splice.redirect(g, read.name, flat.name, skip=(flat.name,))
    else:  # the interleave reads each file's lines: its function and captures change
        fn = got["FlatMapDataset"][0].attr["f"].func.name
        data = _data(read)
        n_caps = len(read.attr["Targuments"].list.type)
        control = [i for i in read.input if i.startswith("^")]
        del read.input[:]
        read.input.extend([data[0], *data[1 + n_caps :], *control])
        read.attr["f"].func.name = fn
        read.attr["f"].func.attr.clear()
        del read.attr["Targuments"].list.type[:]
        splice.retype(read, [string], [splice.scalar_shape()])
    for st in found.passes:
        splice.retype(nodes[st.name], [string], [splice.scalar_shape()])
    splice.retype(batch_node, [string], [splice.scalar_shape(lead)])
    splice.redirect(g, batch_node.name, decode.name, skip=(decode.name,))
    decode.input[0] = batch_node.name
    out = splice.rebuild(g, ds.element_spec)
    old = splice.node_dataset(splice.unshuffled(graph.graph_def), found.batch.name)
    new = splice.node_dataset(splice.unshuffled(g), decode.name)
    out.doctor_check = (old, new)
    files = f"{len(found.files)} file(s)" if found.files else "the files"
    out.doctor_note = (
        f"the lines of {files} decoded per batch: one decode_csv of {len(found.defaults)} "
        "columns" + (", every line checked (ignore_errors)" if found.ignore_errors else "")
    )
    return out


def _one_at_a_time(nodes: dict[str, Any], read: Any) -> bool:
    """An interleave that reads one file at a time (cycle_length 1), or a flat_map."""
    if read.op == "FlatMapDataset":
        return True
    cycle = lint.const_value(nodes, _data(read)[1 + len(read.attr["Targuments"].list.type)])
    return cycle is not None and int(cycle) == 1


# ---- the same pipeline as code -------------------------------------------------------------
_TYPES = {
    "int32": "tf.int32",
    "int64": "tf.int64",
    "float32": "tf.float32",
    "float64": "tf.float64",
}


def _default_code(value: Any) -> str:
    if value.size == 0:
        return "tf.constant([], tf.string)" if value.dtype.kind in "OSU" else "[]"
    item = value.ravel()[0]
    if value.dtype.kind in "OSU":
        text = item.decode() if isinstance(item, bytes) else str(item)
        return repr(text)
    return f"tf.constant({item.item()!r}, {_TYPES.get(value.dtype.name, 'tf.float32')})"


def header_names(found: CsvRead) -> list[str] | None:
    """The column names of the first file's header (None: no header, or not readable)."""
    import csv

    import tensorflow as tf

    if not found.header or not found.files:
        return None
    try:
        with tf.io.gfile.GFile(found.files[0]) as f:
            first = f.readline()
    except (tf.errors.OpError, UnicodeDecodeError):
        return None
    return next(csv.reader([first], delimiter=found.delim or ","), None)


def csv_code(found: CsvRead, spec: Any) -> str:
    """The pipeline with the lines decoded per batch, as code: the column names from the
    header, make_csv_dataset's inferred types as record defaults, the label split off as the
    dataset's element_spec `spec` says."""
    names = header_names(found)
    if names is not None and found.select_cols:
        names = [names[i] for i in found.select_cols if i < len(names)]
    defaults = ", ".join(_default_code(d) for d in found.defaults)
    files = (
        repr(found.files if len(found.files) != 1 else found.files[0]) if found.files else "FILES"
    )
    skip = ".skip(1)" if found.header else ""
    shuffle = next((s for s in found.passes if s.kind == "shuffle"), None)
    repeat = ".repeat()" if any(s.kind == "repeat" for s in found.passes) else ""
    order = f".shuffle({shuffle.buffer_size})" if shuffle and shuffle.buffer_size else ""
    label = None
    if names and isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], dict):
        rest = [n for n in names if n not in spec[0]]
        label = rest[0] if len(rest) == 1 else None
    options = []
    if found.delim != ",":
        options.append(f"field_delim={found.delim!r}")
    if found.na_value:
        options.append(f"na_value={found.na_value!r}")
    if not found.quote:
        options.append("use_quote_delim=False")
    opts = "".join(f", {o}" for o in options)
    if names:
        body = (
            f"features = dict(zip({names!r}, "
            f"tf.io.decode_csv(lines, record_defaults=[{defaults}]{opts})))"
        )
        ret = f"features, features.pop({label!r})" if label else "features"
    else:
        body = f"columns = tf.io.decode_csv(lines, record_defaults=[{defaults}]{opts})"
        ret = "tuple(columns)"
    reader = (
        "tf.data.TextLineDataset"
        if len(found.files) <= 1
        else ("tf.data.Dataset.from_tensor_slices")
    )
    read = (
        f"{reader}({files}){skip}"
        if len(found.files) <= 1
        else f"{reader}({files}).interleave(lambda f: tf.data.TextLineDataset(f){skip})"
    )
    return (
        f"def decode(lines):\n    {body}\n    return {ret}\n\n"
        f"ds = {read}{order}{repeat}.batch({found.batch.batch_size})"
        ".map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)"
    )
