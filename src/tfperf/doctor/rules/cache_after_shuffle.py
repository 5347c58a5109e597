"""The doctor's rule for a cache placed after a shuffle: the cache keeps the elements in the
order the shuffle gave them in the first epoch and replays that order in every later epoch,
so the shuffle is frozen (tf.data's guide: shuffle after calling cache). It reads the graph
only and measures nothing; like every module here it registers itself, so this file and its
test (tests/doctor/rules/test_cache_after_shuffle.py) are the whole rule.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.rules.registry import rule


def _reshuffles(graph: lint.DatasetGraph, st: lint.GraphStage) -> bool:
    """A shuffle that draws a new order each epoch (reshuffle_each_iteration, the default)."""
    node = next(n for n in graph.graph_def.node if n.name == st.name)
    return "reshuffle_each_iteration" not in node.attr or node.attr["reshuffle_each_iteration"].b


def _at(ctx: Evidence, call: str, after: str) -> str:
    """' (at file:line: `code`)' where the user's function writes `call`, when inspect finds it."""
    where = ctx.source.where(call, after=after) if ctx.source is not None else None
    return f" (at {where})" if where else ""


@rule("cache_after_shuffle", "data", 45, order=True)
def rule_cache_after_shuffle(ctx: Evidence) -> list[Finding]:
    """A cache after a shuffle that reshuffles each epoch, with no shuffle after the cache:
    every epoch after the first replays the first one's order. A shuffle after the cache
    reorders what it replays, and a cache after a repeat (or shuffle_and_repeat) never
    replays an epoch of its own: neither gets the finding."""
    shuffle = None
    for st in ctx.graph.stages:
        if st.kind == "repeat" or "Repeat" in st.op:
            return []
        if st.kind == "shuffle" and shuffle is None and _reshuffles(ctx.graph, st):
            shuffle = st
        elif st.kind == "cache" and shuffle is not None:
            if any(s.kind == "shuffle" for s in ctx.graph.stages[st.index + 1 :]):
                return []
            batches = (
                "; cache before the batch, so that the batches differ too: "
                ".cache().shuffle(buffer).batch(batch_size)"
                if st.batched
                else ""
            )
            return [
                Finding(
                    "cache_after_shuffle",
                    "cache after shuffle: every epoch in the same order",
                    st.label,
                    f"{st.label} comes after {shuffle.label} and no shuffle follows it: the "
                    "cache keeps the order the shuffle drew in the first epoch and replays it "
                    "in every later one, so each epoch trains on the same sequence of examples "
                    "(the same batches, in the same order)",
                    "shuffle after the cache: .cache().shuffle(buffer) instead of "
                    f".shuffle(buffer).cache(){batches}" + _at(ctx, ".cache(", after=".shuffle("),
                    "a new order every epoch (the shuffling the pipeline was written for); the "
                    "same examples, the same speed",
                    None,
                    "data",
                    st.index,
                )
            ]
    return []
