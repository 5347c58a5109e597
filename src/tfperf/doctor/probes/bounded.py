"""Keeps the doctor within the RAM budget: a shuffle buffer or in-memory cache that the graph
shows to be larger than the budget is never filled. The doctor times a capped copy instead
(GraphDef edit: the buffer cut to what fits, the cache left out) and names the original.

It times nothing: diagnosis/ measures the copy, rules/ram.py words the shuffle finding.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psutil

from tfperf.config import RunConfig
from tfperf.data.pipeline_sizes import plan_shuffle_buffer
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint

if TYPE_CHECKING:
    import tensorflow as tf

# An over-budget buffer is measured with at most this many elements: a shuffle's steady
# rate does not depend on its size, and every probe refills it in its untimed warm-up.
MEASURE_BUFFER = 10_000
# Any buffer is timed with at most this many: a real-size pipeline's shuffle(20000) after an
# unbatch took 9 s to fill at each probe beside two CPU hogs (a trial pair took 20 s), and a
# shuffle(512) of decoded images 6-12 s; 128 fill in well under a second.
TIMED_BUFFER = 128


@dataclass
class Bounded:
    """The dataset to time, its graph, and what was capped to get it."""

    dataset: tf.data.Dataset
    graph: lint.DatasetGraph  # stages of the original (labels), GraphDef of the copy
    bytes_in: dict[int, int] = field(default_factory=dict)  # stage index -> B per element in
    # shuffle stage -> B per element at the start of the maps it could move before
    # (lint.maps_before): what its buffer would hold there.
    early_bytes: dict[int, int] = field(default_factory=dict)
    capped: dict[int, int] = field(default_factory=dict)  # shuffle stage -> measured buffer
    # shuffle stage -> the buffer it is timed with, within the RAM budget (TIMED_BUFFER)
    timed_buffers: dict[int, int] = field(default_factory=dict)
    oversize_caches: list[tuple[lint.GraphStage, int | None, int]] = field(default_factory=list)
    unmeasured: dict[int, str] = field(default_factory=dict)  # stage -> why its size is unknown

    @property
    def cache_notes(self) -> list[str]:
        return [
            f"{st.label}: timed without the cache (it would outgrow the RAM budget)"
            for st, _, _ in self.oversize_caches
        ]

    @property
    def notes(self) -> list[str]:
        out = [
            f"{st.label}: timed with a buffer of {self.capped[st.index]:,} elements (the "
            "requested one does not fit the RAM budget)"
            for st in self.graph.stages
            if st.index in self.capped
        ]
        out += self.cache_notes
        out += [
            f"{st.label}: element size {self.unmeasured[st.index]}"
            for st in self.graph.stages
            if st.index in self.unmeasured
        ]
        if self.timed_buffers:
            labels = ", ".join(s.label for s in self.graph.stages if s.index in self.timed_buffers)
            out.append(
                f"{labels}: timed with a buffer of {TIMED_BUFFER} elements (a shuffle's rate per "
                "element does not depend on its buffer; filling the whole one at every probe "
                "would spend the time budget); the pipeline returned keeps its buffer"
            )
        return out


class UnmeasuredBytes(ValueError):
    """An element whose bytes cannot be read: it holds opaque variant tensors."""


def element_bytes(element: Any) -> int:
    """Bytes held by one element (strings by their length; a ragged tensor by its values
    and row splits, a sparse one by its indices, values and shape). UnmeasuredBytes for an
    opaque variant (a ragged or sparse tensor whose structure the graph lost, a dataset)."""
    # TensorFlow is imported on first use so that `tfperf --help` stays fast.
    import numpy as np
    import tensorflow as tf

    total = 0
    # expand_composites: a RaggedTensor or SparseTensor as the dense tensors it is made of.
    for t in tf.nest.flatten(element, expand_composites=True):
        if getattr(t, "dtype", None) == tf.variant:
            raise UnmeasuredBytes(
                "not measured: its elements hold opaque variant tensors (ragged or sparse "
                "tensors whose structure the dataset's graph does not record)"
            )
        value = np.asarray(t.numpy() if hasattr(t, "numpy") else t)
        if value.dtype == object:
            total += sum(len(v) for v in np.ravel(value)) + 8 * value.size
        else:
            total += value.nbytes
    return total


def mean_bytes(ds: tf.data.Dataset, n: int = 4) -> int:
    """Mean bytes of the first `n` elements of `ds`."""
    elems = list(ds.take(n))
    return int(sum(element_bytes(e) for e in elems) / max(1, len(elems)))


def ram_budget_bytes(cfg: RunConfig) -> int:
    """The RAM a buffer or cache may use: the run file's budget, at most half the free RAM."""
    return int(min(cfg.pipeline.shuffle_ram_mb * 2**20, psutil.virtual_memory().available / 2))


# A cache holds the examples of a whole epoch, which users size to their host: the spectrograms
# of a 9,473-clip audio set take 1.6 GB, over the shuffle buffer's 1 GiB default.
CACHE_RAM_SHARE = 0.25


def cache_budget_bytes(cfg: RunConfig | None = None) -> int:
    """The RAM an in-memory cache may use: the run file's pipeline.shuffle_ram_mb where it
    sets one (at most half the free RAM), else a quarter of the free RAM (at least the
    shuffle buffer's default)."""
    from tfperf.config import PipelineConfig

    available = psutil.virtual_memory().available
    pipeline = cfg.pipeline if cfg is not None else PipelineConfig()
    shuffle_budget = int(min(pipeline.shuffle_ram_mb * 2**20, available / 2))
    if "shuffle_ram_mb" in pipeline.model_fields_set:
        return shuffle_budget
    return int(max(shuffle_budget, available * CACHE_RAM_SHARE))


def memory_cache(graph_def: Any, stage: lint.GraphStage) -> bool:
    """A cache() in RAM (no file name)."""
    nodes = {n.name: n for n in graph_def.node}
    node = nodes[stage.name]
    name = lint.const_value(nodes, node.input[1]) if len(node.input) > 1 else None
    return name is not None and not bytes(name.item() if hasattr(name, "item") else name)


def _set_buffer(graph_def: Any, stage: lint.GraphStage, size: int) -> None:
    """Points the shuffle's buffer_size at a new constant (the old one may be shared)."""
    import tensorflow as tf
    from tensorflow.core.framework import node_def_pb2

    const = node_def_pb2.NodeDef(name=f"{stage.name}/tfperf_capped_buffer", op="Const")
    const.attr["dtype"].type = tf.int64.as_datatype_enum
    const.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(size, tf.int64))
    graph_def.node.append(const)
    node = next(n for n in graph_def.node if n.name == stage.name)
    node.input[1] = const.name


def _bypass(graph_def: Any, stage: lint.GraphStage) -> None:
    """Feeds the cache's consumers from its input: the copy runs without the cache."""
    node = next(n for n in graph_def.node if n.name == stage.name)
    for n in graph_def.node:
        for i, ref in enumerate(n.input):
            if ref.split(":")[0] == stage.name and not ref.startswith("^"):
                n.input[i] = node.input[0]


def _prefix_before(graph: lint.DatasetGraph, st: lint.GraphStage) -> tf.data.Dataset:
    return lint.prefix_dataset(graph, graph.stages[st.index - 1])


def bounded(
    ds: tf.data.Dataset, graph: lint.DatasetGraph, budget: int, cache_budget: int | None = None
) -> Bounded:
    """`ds` as the doctor may time it: every shuffle buffer over `budget` bytes capped (at
    most MEASURE_BUFFER elements) and every in-memory cache whose epoch outgrows
    `cache_budget` (default: `budget`) left out. Stages are handled source first, so a size
    is read from an already capped prefix: no buffer is ever filled beyond the budget."""
    cache_budget = budget if cache_budget is None else cache_budget
    g = copy.deepcopy(graph.graph_def)
    work = lint.DatasetGraph(g, graph.stages, graph.element_spec, graph.deterministic_option)
    out = Bounded(ds, work)
    for st in graph.stages:
        if st.index == 0 or st.kind not in ("shuffle", "cache"):
            continue
        before = _prefix_before(work, st)
        try:
            per = mean_bytes(before)
        except UnmeasuredBytes as exc:
            _unmeasured(out, g, st, before, str(exc))
            continue
        out.bytes_in[st.index] = per
        maps = lint.maps_before(graph, st) if st.kind == "shuffle" else []
        if maps:
            try:
                out.early_bytes[st.index] = mean_bytes(_prefix_before(work, maps[0]))
            except UnmeasuredBytes:
                pass  # the shuffle's move before the maps is then not weighed
        if st.kind == "shuffle" and st.buffer_size and st.buffer_size > 0:
            plan = plan_shuffle_buffer(st.buffer_size, per, budget / 2**20)
            if plan.granted < plan.requested:
                out.capped[st.index] = max(1, min(plan.granted, MEASURE_BUFFER))
                _set_buffer(g, st, out.capped[st.index])
            elif st.buffer_size > TIMED_BUFFER:
                out.timed_buffers[st.index] = TIMED_BUFFER
                _set_buffer(g, st, TIMED_BUFFER)
        elif st.kind == "cache" and memory_cache(g, st):
            n = lint.known_cardinality(before)
            infinite = lint.infinite(before)
            if infinite or (n is not None and n * per > cache_budget):
                out.oversize_caches.append((st, None if infinite else n, per))
                _bypass(g, st)
    if out.capped or out.oversize_caches or out.timed_buffers:
        out.dataset = lint.rebuild(g, ds.element_spec)
    # A cache left out is not a stage of the copy: its prefix is not timed (it would fill).
    gone = {st.index for st, _, _ in out.oversize_caches}
    out.graph.stages = [st for st in graph.stages if st.index not in gone]
    return out


def _unmeasured(
    out: Bounded, g: Any, st: lint.GraphStage, before: tf.data.Dataset, why: str
) -> None:
    """A shuffle or cache whose elements' size cannot be read: the RAM it needs is unknown,
    so a shuffle is timed with at most MEASURE_BUFFER elements and an endless in-memory
    cache is left out (it would fill forever), as for one known to be over the budget."""
    out.unmeasured[st.index] = why
    if st.kind == "shuffle" and st.buffer_size and st.buffer_size > MEASURE_BUFFER:
        out.capped[st.index] = MEASURE_BUFFER
        _set_buffer(g, st, MEASURE_BUFFER)
    elif st.kind == "cache" and memory_cache(g, st) and lint.infinite(before):
        out.oversize_caches.append((st, None, 0))
        _bypass(g, st)


def cache_findings(b: Bounded, budget: int) -> list[Finding]:
    """A RAM risk per in-memory cache that would outgrow the budget."""
    out = []
    for st, n, per in b.oversize_caches:
        held = "elements without end (it caches an infinite dataset)"
        if n is not None:
            held = f"{n:,} elements x {per:,} B = {n * per / 2**20:,.1f} MiB"
        out.append(
            Finding(
                "cache_over_budget",
                "in-memory cache larger than the RAM budget",
                st.label,
                f"{st.label} holds {held}; budget {budget / 2**20:,.1f} MiB "
                "(pipeline.shuffle_ram_mb where the run file sets it, at most half the free "
                "RAM; else a quarter of the free RAM)",
                "cache to a file (.cache('/fast/disk/cache')), cache an earlier, smaller "
                "stage (before decoding or resizing), or drop the cache",
                "no swapping or out-of-memory kill in the first epoch",
                None,
                "risk",
                st.index,
            )
        )
    return out
