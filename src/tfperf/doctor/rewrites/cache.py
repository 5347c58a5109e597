"""--fix's in-memory cache of a pipeline's costly deterministic work (a decode, a parse, a
resize), also where users' pipelines shuffle their source first: `list_files` shuffles the
file names by default, so nothing after it looks deterministic. A full shuffle of a finite
source followed by one-to-one deterministic maps gives the same orders (uniformly random
permutations of the same elements) as the maps followed by a full shuffle, so the shuffle
moves after the cache: each file is read and decoded once, and every epoch is still
reshuffled. The stages after the cache (batch, shuffle, prefetch, repeat) are re-applied;
where other stages follow (a random augment's map), the cache is spliced into the user's graph
instead, before them.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import UnmeasuredBytes, mean_bytes, memory_cache
from tfperf.doctor.rewrites import splice

if TYPE_CHECKING:
    import tensorflow as tf

# Stages after the cache, applied again to the cached elements.
REAPPLIED = ("batch", "shuffle", "prefetch", "repeat", "options", "unbatch")
# Elements of a source whose count tf.data does not know (records read from files) are
# counted in one pass, when it takes at most this long; a larger source stays unknown.
COUNT_SECONDS = 4.0  # a 60,000-record source (MNIST-sized) counts in 1.3-2.7 s idle
_COUNTED: dict[tuple[int, str], int | None] = {}


def element_count(graph: lint.DatasetGraph, stage: lint.GraphStage) -> int | None:
    """Elements of one pass of the pipeline cut after `stage`: tf.data's cardinality, else
    counted within COUNT_SECONDS (once per graph and stage), else None."""
    ds = lint.prefix_dataset(graph, stage)
    n = lint.known_cardinality(ds)
    if n is not None or lint.infinite(ds):
        return n
    key = (hash(graph.graph_def.SerializeToString(deterministic=True)), stage.name)
    if key not in _COUNTED:
        _COUNTED[key] = _count_within(ds, COUNT_SECONDS)
    return _COUNTED[key]


# Elements counted in batches of PROBE_BATCH first (their rate sets the batch of flags); a
# batch of flags then takes about BATCH_SECONDS, so the deadline is read often even where
# one element is slow (a packing loop's flat_map made a batch of 4,096 flags take 95 s).
PROBE_SECONDS = 0.2
PROBE_BATCH = 16
BATCH_SECONDS = 0.1
MAX_FLAGS = 4096


def _countable(ds: tf.data.Dataset) -> tf.data.Dataset:
    """`ds` as elements that batch: as they are where they have one fixed shape; else (varying
    shapes, as before a padded_batch) one flag each, no function call per element where none
    is needed (60,000 records: 0.6 s batched as they are, 1.8 s as flags)."""
    import tensorflow as tf

    return ds if _stackable(ds.element_spec) else ds.map(lambda *_: tf.constant(True))


def _count_within(ds: tf.data.Dataset, seconds: float) -> int | None:
    """Elements of one pass of `ds`, or None when counting them takes over `seconds` (read
    between elements, or between batches sized to take ~BATCH_SECONDS each)."""
    import time

    flags = _countable(ds)
    start = time.monotonic()
    deadline, count = start + seconds, 0
    # Small batches first: their rate is the source's, not the Python loop's (one element
    # per pull counted 7,500 records/s where batches count 45,000), and sizes those after.
    for batch in flags.batch(PROBE_BATCH):
        count += tf_len(batch)
        now = time.monotonic()
        if now > deadline:
            return None
        if now - start > PROBE_SECONDS:
            break
    else:
        return count  # one pass, counted in small batches
    rate = count / max(time.monotonic() - start, 1e-6)
    size = int(min(MAX_FLAGS, max(1, rate * BATCH_SECONDS)))
    # The rest in batches of that size: the count, not the Python loop, sets the pace.
    for batch in flags.skip(count).batch(size).prefetch(1):
        count += tf_len(batch)
        if time.monotonic() > deadline:
            return None
    return count


def _stackable(spec: Any) -> bool:
    """Every component a tensor of one fully defined shape: elements batch as they are."""
    import tensorflow as tf

    flat = tf.nest.flatten(spec)
    return all(
        type(s) is tf.TensorSpec and s.shape.is_fully_defined() and s.dtype != tf.variant
        for s in flat
    )


def count_stage(prefix: list[lint.GraphStage]) -> lint.GraphStage:
    """The stage of `prefix` to count at: its last one before the maps, parses and shuffles
    that end it (each gives one element per element: the same count, without their work)."""
    at = len(prefix) - 1
    while at > 0 and prefix[at].kind in ("map", "parse", "shuffle", "cache"):
        at -= 1
    return prefix[at]


def tf_len(batch: object) -> int:
    """Rows of a batch: the first dimension of its first tensor."""
    import tensorflow as tf

    first = tf.nest.flatten(batch)[0]
    return int(tf.shape(first)[0])


def source_shuffle(graph: lint.DatasetGraph) -> lint.GraphStage | None:
    """The pipeline's first random stage when it is a shuffle of a finite, deterministic
    source (list_files' shuffle; image_dataset_from_directory's, of batch_size * 8 paths):
    one that can move later. A buffer that held part of the source becomes a full shuffle
    after the cache: every order equally likely, a fuller shuffle than the user's."""
    first = next((s for s in graph.stages if s.is_random), None)
    if first is None or first.kind != "shuffle" or first.index == 0:
        return None
    before = graph.stages[first.index - 1]
    while before.kind == "cache" and before.index > 0:  # the same count, no cache filled
        before = graph.stages[before.index - 1]
    # An in-memory cache before it (of records, file names) may go: a later one replaces it.
    early = graph.stages[: first.index]
    if any(s.kind == "repeat" or s.has_py_func for s in early) or any(
        s.kind == "cache" and not memory_cache(graph.graph_def, s) for s in early
    ):
        return None
    if element_count(graph, before) is None:
        return None  # an endless or too large source: no full shuffle after a cache
    return first


def early_caches(graph: lint.DatasetGraph) -> list[lint.GraphStage]:
    """In-memory caches inside the cacheable prefix with deterministic work after them (a
    cache of the records before their parse): the prefix's cache replaces them."""
    prefix = cacheable_prefix(graph)
    caches = [s for s in prefix if s.kind == "cache"]
    if not caches or prefix[-1].kind == "cache":
        return []
    work_after = any(s.kind in ("map", "parse") for s in prefix if s.index > caches[-1].index)
    return caches if work_after else []


def cacheable_prefix(graph: lint.DatasetGraph) -> list[lint.GraphStage]:
    """Stages whose elements are the same every epoch, up to their order: the deterministic
    prefix, or, after a source shuffle, the one-to-one deterministic maps that follow it."""
    shuffle = source_shuffle(graph)
    if shuffle is None:
        return [s for s in lint.deterministic_prefix(graph) if s.kind != "options"]
    out = list(graph.stages[: shuffle.index + 1])
    for st in graph.stages[shuffle.index + 1 :]:
        if st.kind not in ("map", "parse") or st.is_random or st.has_py_func or st.batched:
            break
        out.append(st)
    return out if len(out) > shuffle.index + 1 else []


def _without(graph: lint.DatasetGraph, stage: lint.GraphStage) -> lint.DatasetGraph:
    """The graph with `stage` bypassed: its consumers read its input."""
    g = copy.deepcopy(graph.graph_def)
    node = next(n for n in g.node if n.name == stage.name)
    for n in g.node:
        if n.input and n.input[0].split(":")[0] == stage.name:
            n.input[0] = node.input[0]
    return lint.DatasetGraph(g, graph.stages, graph.element_spec, graph.deterministic_option)


def _reapply(
    ds: tf.data.Dataset, graph: lint.DatasetGraph, rest: list[lint.GraphStage]
) -> tf.data.Dataset | None:
    """`ds` with the stages `rest` applied again (None when one cannot be)."""
    import tensorflow as tf

    nodes = {n.name: n for n in graph.graph_def.node}
    for st in rest:
        node = nodes[st.name]
        if st.kind == "batch" and st.padded:
            padded = _padded_batch(ds, nodes, node, st)
            if padded is None:
                return None
            ds = padded
        elif st.kind == "batch":
            par = tf.data.AUTOTUNE if st.parallel else None
            ds = ds.batch(st.batch_size, bool(st.drop_remainder), num_parallel_calls=par)
        elif st.kind == "shuffle":
            ds = ds.shuffle(st.buffer_size)
        elif st.kind == "prefetch":
            ds = ds.prefetch(st.buffer_size if (st.buffer_size or -1) >= 0 else tf.data.AUTOTUNE)
        elif st.kind == "repeat":
            count = lint.const_value(nodes, node.input[1])
            ds = ds.repeat(None if count is None or int(count) < 0 else int(count))
        elif st.kind == "unbatch":
            ds = ds.unbatch()
        elif st.kind != "options":
            return None
    return ds


def _padded_batch(
    ds: tf.data.Dataset, nodes: dict[str, Any], node: Any, st: lint.GraphStage
) -> tf.data.Dataset | None:
    """`ds` in the padded batches of `node` (a PaddedBatchDataset: its padded shapes and
    padding values read back from the graph's constants); None when one is not a constant.
    A plain batch in its place cannot stack examples of different lengths."""
    import tensorflow as tf

    inputs = [ref for ref in node.input if not ref.startswith("^")]
    # input dataset, batch size, N padded shapes, N padding values, (V2) drop_remainder
    k = (len(inputs) - (3 if node.op.endswith("V2") else 2)) // 2
    shapes = [lint.const_value(nodes, ref) for ref in inputs[2 : 2 + k]]
    values = [lint.const_value(nodes, ref) for ref in inputs[2 + k : 2 + 2 * k]]
    specs = tf.nest.flatten(ds.element_spec)
    if k != len(specs) or any(v is None for v in [*shapes, *values]) or not st.batch_size:
        return None
    drop = lint.const_value(nodes, inputs[-1]) if node.op.endswith("V2") else None
    return ds.padded_batch(
        st.batch_size,
        padded_shapes=tf.nest.pack_sequence_as(
            ds.element_spec,
            [tf.TensorShape([None if d < 0 else int(d) for d in s]) for s in shapes],
        ),
        padding_values=tf.nest.pack_sequence_as(
            ds.element_spec,
            [tf.constant(v, dtype=spec.dtype) for v, spec in zip(values, specs, strict=True)],
        ),
        drop_remainder=bool(drop) if drop is not None else False,
    )


# The cache's trial times the epochs after the first. Where filling it takes longer than this,
# the candidate carries `doctor_timed`: the same pipeline over the first elements the cached
# work makes in about this time (a trial cannot wait for a whole epoch of decoded audio).
FILL_SECONDS = 2.0


def made_within(ds: tf.data.Dataset, seconds: float) -> int | None:
    """Elements of `ds` made within `seconds` (pulled in small batches), or None when its one
    pass ends sooner."""
    import time

    flags = _countable(ds)
    deadline, count = time.monotonic() + seconds, 0
    for batch in flags.batch(PROBE_BATCH).prefetch(1):
        count += tf_len(batch)
        if time.monotonic() > deadline:
            return count
    return None


def cache_work(
    graph: lint.DatasetGraph,
    ds: tf.data.Dataset,
    budget: int,
    sample_seconds: float | None = None,
) -> tf.data.Dataset | None:
    """`ds` with its cacheable prefix cached in RAM (a source shuffle moved after the cache,
    over every element), when the cached elements fit `budget` bytes and only REAPPLIED
    stages follow; None otherwise. With `sample_seconds`, a cache that takes longer to fill
    gets `doctor_timed` (see FILL_SECONDS) and a `doctor_note` saying so."""

    prefix = cacheable_prefix(graph)
    if not prefix or not any(s.kind in ("map", "parse", "read") for s in prefix):
        return None
    end = prefix[-1]
    rest = graph.stages[end.index + 1 :]
    # A shuffle in the prefix is its source shuffle (a deterministic prefix has none).
    shuffle = next((s for s in prefix if s.kind == "shuffle"), None)
    if shuffle is not None and splice.has_shuffle_and_repeat(graph.graph_def):
        return None  # bypassing a fused shuffle-and-repeat would drop its repeat
    work = _without(graph, shuffle) if shuffle is not None else graph
    for old in early_caches(graph):  # the new cache, after the work, replaces it
        work = _without(work, old)
    cached = lint.prefix_dataset(work, end)
    n = element_count(work, count_stage(prefix))
    # A shuffle after the cache holds the cached tensors, not copies (2,000 elements of 1 MB:
    # RSS grew 1.9 GB with or without a shuffle(2000) after the cache).
    try:
        held = (n or 0) * mean_bytes(cached)
    except UnmeasuredBytes:
        return None  # its size in RAM is unknown: no cache proposed
    if n is None or held > budget:
        return None
    reapplied = all(s.kind in REAPPLIED for s in rest)

    def build(head: tf.data.Dataset, count: int) -> tf.data.Dataset | None:
        if reapplied:
            return _cached(ds, graph, head, count, shuffle is not None, rest)
        return _spliced(ds, work, end, head, count, shuffle is not None)

    out = build(cached, n)
    if out is None:
        return None
    out.doctor_note = held_note(held, n, budget, shuffle)
    if sample_seconds is None:
        return out
    made = made_within(cached, sample_seconds)
    if made is not None and made < n:
        timed = build(cached.take(made), made)
        if timed is not None:
            out.doctor_timed = timed
            out.doctor_note += (
                f"; timed with its first {made:,} of {n:,} elements cached: the epochs after "
                "the first (the first runs at the pipeline's pace while the cache fills)"
            )
    return out


def held_note(held: float, n: int, budget: int, shuffle: lint.GraphStage | None) -> str:
    """What the cache holds in RAM, against its budget, and where a source shuffle went: the
    trial's row says the RAM it spends (a kept cache is the pipeline's largest buffer)."""
    note = (
        f"holds {n:,} elements in RAM, ~{held / 2**20:,.1f} MiB (budget {budget / 2**20:,.0f} MiB)"
    )
    if shuffle is not None:
        note += f"; {shuffle.label} moves after it, over all {n:,} (it holds the cached tensors)"
    return note


def _cached(
    ds: tf.data.Dataset,
    graph: lint.DatasetGraph,
    cached: tf.data.Dataset,
    n: int,
    shuffled: bool,
    rest: list[lint.GraphStage],
) -> tf.data.Dataset | None:
    """`cached` cached, reshuffled over its `n` elements when the source was, then the stages
    `rest` again, as `ds`'s element spec and options."""
    import tensorflow as tf

    out = cached.cache()
    if shuffled:
        out = out.shuffle(n, reshuffle_each_iteration=True)
    out = _reapply(out, graph, rest)
    if out is None:
        return None
    variant = tf.data.experimental.to_variant(out)
    return tf.data.experimental.from_variant(variant, ds.element_spec).with_options(ds.options())


def _spliced(
    ds: tf.data.Dataset,
    work: lint.DatasetGraph,
    end: lint.GraphStage,
    cached: tf.data.Dataset,
    n: int,
    shuffled: bool,
) -> tf.data.Dataset | None:
    """`cached` cached (and reshuffled over its `n` elements when the source was) spliced into
    the user's graph after `end`: every stage after it, maps included, reads the cache."""
    import tensorflow as tf

    head = cached.cache()
    if shuffled:
        head = head.shuffle(n, reshuffle_each_iteration=True)
    src = splice.serialized(head)
    ret = next((x for x in src.node if x.op == "_Retval"), None)
    if ret is None:
        return None
    g = copy.deepcopy(work.graph_def)
    prefix = f"{end.name}/tfperf_cache"
    splice.import_dataset(g, head, prefix)
    top = f"{prefix}/{ret.input[0].split(':')[0]}"
    splice.redirect(
        g, end.name, top, skip=tuple(x.name for x in g.node if x.name.startswith(prefix))
    )
    try:
        out = splice.rebuild(g, ds.element_spec)
    except (tf.errors.OpError, ValueError, TypeError):
        return None  # the spliced graph does not build: no cache proposed
    return out.with_options(ds.options())


# tf.data discards an in-memory cache whose first epoch its iterator left unfinished, and each
# timed repeat is an iterator of its own: a repeat shorter than an epoch would time the fill
# every time (a 3,000-image cache read 0.75x of the uncached pipeline in every pair). A trial
# fills the caches first, in one pass of at most this long; a longer one is left unfilled.
FILL_PASS_SECONDS = 8.0


def filled_repeat(ds: tf.data.Dataset, seconds: float = FILL_PASS_SECONDS) -> tf.data.Dataset:
    """`ds` repeated (as measure.repeat_if_finite), its in-memory caches filled by one pass of
    that very dataset: an iterator finalizes (rewrites) the dataset it is made from, caches
    included, and keeps that copy with the object, so a pass of `ds` would fill a cache the
    repeat does not read. A pass longer than `seconds`, or of unknown length, is not made (it
    is counted first, on a copy, within `seconds`). Memoized on `ds` (`doctor_repeat`)."""
    import time

    from tfperf.measure import repeat_if_finite

    known = getattr(ds, "doctor_repeat", None)
    if known is not None:
        return known
    out = repeat_if_finite(ds)
    graph = lint.read_graph(ds)
    if out is not ds and any(
        s.kind == "cache" and memory_cache(graph.graph_def, s) for s in graph.stages
    ):
        deadline = time.monotonic() + seconds
        n = lint.known_cardinality(ds)
        if n is None:  # counted on a copy: its cache is dropped with it
            n = _count_before(graph, ds, deadline)
        if n is not None:
            it = iter(out)
            for _ in range(n):
                next(it)
                if time.monotonic() > deadline:
                    break  # the partial cache is discarded with the iterator: the fill is timed
            del it
    try:
        ds.doctor_repeat = out
    except AttributeError:  # a dataset type without a __dict__: built again next time
        pass
    return out


def _count_before(graph: lint.DatasetGraph, ds: tf.data.Dataset, deadline: float) -> int | None:
    """Elements of one pass of `ds`, counted on a copy rebuilt from `graph` (_count_within),
    or None when that outlasts `deadline` (time.monotonic) or the copy cannot be built."""
    import time

    import tensorflow as tf

    try:
        copied = lint.rebuild(copy.deepcopy(graph.graph_def), ds.element_spec)
    except (tf.errors.OpError, ValueError, TypeError):
        return None
    return _count_within(copied, max(0.0, deadline - time.monotonic()))
