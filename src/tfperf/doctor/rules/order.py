"""The doctor's rules about the order of the stages, read from the graph alone (nothing
runs): a shuffle after batch (it shuffles whole batches: the same batches every epoch) and
a repeat before shuffle (the buffer mixes epochs). What they change is what the model
trains on, not speed: "data" findings, ranked before any speed advice (registry.py).
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.rules.registry import rule

# Stages after which the elements are no longer the examples a shuffle should mix: files
# (flat_map, interleave expand them) or batches.
_REGROUP = ("flat_map", "interleave", "batch", "map_batch", "unbatch")


def _at(ctx: Evidence, call: str, **order: str) -> str:
    """' (file:line: `code`)' where the user's function writes `call`, when inspect finds it."""
    where = ctx.source.where(call, **order) if ctx.source is not None else None
    return f" (at {where})" if where else ""


def _examples_shuffled(stages: list[lint.GraphStage], batch: lint.GraphStage) -> bool:
    """True when a shuffle mixes the examples that `batch` groups: one after the last stage
    before the batch that regroups the elements (a file list's shuffle does not count)."""
    for st in reversed(stages[: batch.index]):
        if st.kind == "shuffle":
            return True
        if st.kind in _REGROUP:
            return False
    return False


@rule("shuffle_after_batch", "data", 30, order=True)
def rule_shuffle_after_batch(ctx: Evidence) -> list[Finding]:
    """A shuffle of batches with no shuffle of the examples before their batch."""
    stages, batch = ctx.graph.stages, None
    for st in stages:
        if st.kind in ("batch", "map_batch"):
            batch = st
        elif st.kind == "unbatch":
            batch = None
        elif st.kind == "shuffle" and batch is not None and not _examples_shuffled(stages, batch):
            n, buf = batch.batch_size, st.buffer_size
            same = f"; shuffle({buf * n}) holds as many examples" if buf and n and buf > 0 else ""
            return [
                Finding(
                    "shuffle_after_batch",
                    "shuffle after batch: the same batches every epoch",
                    st.label,
                    f"{st.label} comes after {batch.label} and no shuffle mixes the examples "
                    "before it: it shuffles whole batches, so every epoch trains on the same "
                    "batches (the same examples side by side), only in another order",
                    "shuffle the examples, then batch: .shuffle(buffer).batch(batch_size) "
                    f"instead of .batch(batch_size).shuffle(buffer){same}"
                    + _at(ctx, ".shuffle(", after=".batch("),
                    "batches that differ every epoch (the gradient noise SGD expects); the "
                    "same examples per epoch, the same speed",
                    None,
                    "data",
                    st.index,
                )
            ]
    return []


# Sources a pipeline repeats to pair with every element of a finite dataset (zip): one
# constant (from_tensors) or a counter (range), not the epochs of the data.
_BROADCAST_SOURCES = ("TensorDataset", "RangeDataset")


def _repeated_for_zip(graph: lint.DatasetGraph, repeat: lint.GraphStage) -> bool:
    """A repeat of a from_tensors or range source that a zip then pairs with a finite
    dataset (keras.utils.timeseries_dataset_from_array repeats its array so): the zip
    ends with the finite one, so no epoch follows another."""
    stages = graph.stages
    if repeat.index == 0 or stages[repeat.index - 1].op not in _BROADCAST_SOURCES:
        return False
    for st in stages[repeat.index + 1 :]:
        if st.kind == "shuffle":
            return False
        if st.op == "ZipDataset":
            try:
                return lint.known_cardinality(lint.prefix_dataset(graph, st)) is not None
            except Exception:  # noqa: BLE001 - a prefix that cannot stand alone: no claim
                return False
    return False


@rule("repeat_before_shuffle", "data", 40, order=True)
def rule_repeat_before_shuffle(ctx: Evidence) -> list[Finding]:
    """A shuffle after a repeat: its buffer draws from the next epoch before this one ends.
    A constant or counter repeated only to be zipped with a finite dataset is no epoch."""
    repeat = None
    for st in ctx.graph.stages:
        if st.kind == "repeat" and not _repeated_for_zip(ctx.graph, st):
            repeat = repeat or st
        elif st.kind == "shuffle" and repeat is not None:
            return [
                Finding(
                    "repeat_before_shuffle",
                    "repeat before shuffle: the epochs mix",
                    st.label,
                    f"{repeat.label} comes before {st.label}: the shuffle buffer takes examples "
                    "of the next epoch before this one has been seen whole, so one example can "
                    "come twice before another comes once, and an epoch's end (its metrics, "
                    "evaluation, checkpoint) is not the end of a pass over the data",
                    "shuffle, then repeat: .shuffle(buffer).repeat(epochs) instead of "
                    ".repeat(epochs).shuffle(buffer) (or drop repeat and let the training loop "
                    "count the epochs)" + _at(ctx, ".repeat(", before=".shuffle("),
                    "every example exactly once per epoch, in a fresh order each epoch",
                    None,
                    "data",
                    st.index,
                )
            ]
    return []
