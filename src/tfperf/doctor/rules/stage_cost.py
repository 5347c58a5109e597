"""What a pipeline stage costs, for the rules about the stages (per_example.py, parallel.py,
cache.py): a finding whose change removes part of a stage's measured cost and the training
speed the cost model expects after it, the per-example stages that could run on batches,
and `stage_rule`, which registers a rule finding every stage a predicate picks. It reads the
`Evidence` and measures nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from tfperf.doctor.evidence.evidence import PARALLEL, VECTORIZED, Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.parse_batched import parse_sites
from tfperf.doctor.rewrites.pfor_fn import Refused
from tfperf.doctor.rewrites.vectorize import refusal
from tfperf.doctor.rules.registry import Detect, Rewrite, Rule, register
from tfperf.util.format import number

MIN_STAGE_SHARE = 0.05  # a map costing less of the pipeline's time is not worth changing
MIN_CACHE_SHARE = 0.25  # caching spends RAM: only for a prefix that dominates
# Share of a py_function/numpy_function map's time that runs in parallel: its Python holds
# the GIL (numpy arithmetic per example measured 1.06x with num_parallel_calls on 2 cores).
PY_PARALLEL = 0.1
# A rewrite slower in every paired repeat (twice timed), and below this share of the
# pipeline's median rate, is slower on this host, not noise.
SLOWER = 0.9
WORK_KINDS = ("map", "map_batch", "parse", "read", "flat_map", "interleave")
# Share of a stage's cost each change removes: offline work removes it all; a batched map
# pays its per-call overhead once per batch (~50x cheaper measured, 0.9 is conservative).
BATCHED = ("per_example_parse", "per_example_map")  # codes whose fix is vectorize's rewrite
REMOVED = {
    "py_function": 1.0,
    "from_generator": 1.0,
    "per_example_parse": 0.95,
    "per_example_map": 0.9,
}


def _stage_evidence(ctx: Evidence, st: lint.GraphStage) -> str:
    cost = ctx.stage_cost(st.index)
    share = cost * ctx.pipeline
    timing = next((t for t in ctx.stages if t.index == st.index), None)
    rate = timing.examples_per_s if timing else None
    return (
        f"pipeline up to {st.label}: {number(rate, missing='?')} ex/s; this stage adds "
        f"{cost * 1e6:.1f} us per example (~{min(share, 1.0):.0%} of the pipeline's time; "
        f"pipeline {number(ctx.pipeline)} ex/s, compute limit {number(ctx.compute)} ex/s)"
    )


def stage_finding(
    ctx: Evidence,
    st: lint.GraphStage,
    code: str,
    title: str,
    change: str,
    removed: float,
    saves_cpu: bool = True,
    measured: tuple[float, float] | None = None,
) -> Finding:
    """A finding whose change removes `removed` of the stage's wall time: as CPU work gone
    (offline, batched) or, `saves_cpu` False, as the same work spread over more cores. With
    `measured` (the pipeline alone with --fix's rewrite: examples/s, CPU s per example) the
    rewrite's own rate and CPU time replace the estimate."""
    if measured is not None:
        new_p, cpu_after = measured
        wall, cpu = 1.0 / ctx.pipeline - 1.0 / new_p, ctx.pipeline_cpu - cpu_after
    else:
        wall = removed * ctx.stage_cost(st.index)
        new_p = ctx.pipeline_without(wall)
        cpu = ctx.cpu_of(wall) if saves_cpu else 0.0
    gain = ctx.speedup_pipeline(new_p, cpu)
    return Finding(
        code,
        title,
        st.label,
        _stage_evidence(ctx, st),
        change,
        f"pipeline ~{number(new_p)} ex/s; training ~{gain:.1f}x faster",
        gain,
        "input",
        st.index,
        saves_wall=wall,
        saves_cpu=cpu,
    )


def prefix_cost(ctx: Evidence, index: int) -> float:
    """Seconds per example of the pipeline cut after stage `index`: its prefix's measured
    rate (the stages' own costs, differences of prefixes, are noisier and give a file
    list's stage per-file costs), else the sum of the stages' costs."""
    timing = next((t for t in ctx.stages if t.index == index), None)
    if timing is not None and timing.examples_per_s:
        return 1.0 / timing.examples_per_s
    return sum(ctx.stage_cost(st.index) for st in ctx.graph.stages[: index + 1])


def fixed_share(ctx: Evidence, st: lint.GraphStage) -> float:
    """Share of a stage's cost that a more specific finding already removes."""
    if st.is_generator:
        return REMOVED["from_generator"]
    if st.has_py_func:
        return REMOVED["py_function"]
    if st.has_parse and not st.batched:
        return REMOVED["per_example_parse"] if _parse_removable(ctx, st) else 0.0
    if _per_example_map(ctx, st) and per_element(ctx, st) is None:
        return REMOVED["per_example_map"]
    return 0.0


def _parse_removable(ctx: Evidence, st: lint.GraphStage) -> bool:
    """Whether a rewrite removes a per-example parse's cost: the run file's batched parse,
    the parse per batch (parse_batched.py), or vectorize's pfor trace of the map. A map it
    refuses (a tf.io.parse_tensor per example) keeps its cost for the other findings: a cache
    after the parse was then the larger change (3.8x on a 60,000-record TFRecord dataset)."""
    if st.kind != "map" or st in parse_sites(ctx.graph):
        return True
    if not _per_example_map(ctx, st):
        return False
    try:
        return refusal(ctx.graph, st) is None
    except Exception:  # noqa: BLE001 - a function pfor cannot even load: judged as before
        return True


def _batch_after(graph: lint.DatasetGraph, st: lint.GraphStage) -> bool:
    return any(s.kind in ("batch", "map_batch") for s in graph.stages[st.index + 1 :])


def _per_example_map(ctx: Evidence, st: lint.GraphStage) -> bool:
    return st.kind == "map" and not st.batched and _batch_after(ctx.graph, st)


def per_element(ctx: Evidence, st: lint.GraphStage) -> Refused | None:
    """Why the per-example map `st` can never run on whole batches, when it uses an op
    TensorFlow has for one element only (a file read, an image decode): neither pfor nor a
    hand-written batched version can, so it can only run in parallel. None otherwise (a map
    pfor refuses for other reasons, e.g. text split into ragged pieces, can still be
    written for a batch by hand). The same pfor trace as --fix's vectorize (traced once)."""
    if not _per_example_map(ctx, st):
        return None
    try:
        why = refusal(ctx.graph, st)
    except Exception:  # noqa: BLE001 - a function pfor cannot even load: judged as before
        return None
    return why if why is not None and why.per_element else None


def measured_rewrite(
    ctx: Evidence, variant: str, stages: list[lint.GraphStage]
) -> tuple[float, float] | None:
    """(examples/s, CPU s per example) of the pipeline alone with --fix's rewrite `variant`
    when the diagnosis timed it and one stage alone can claim its gain; else None."""
    return ctx.rewritten.get(variant) if len(stages) == 1 else None


def stage_rule(
    code: str,
    priority: int,
    title: str,
    change: str,
    applies: Callable[[Evidence, lint.GraphStage], bool],
    rewrites: tuple[Rewrite, ...] = (),
) -> Detect:
    """Registers rule `code` (an "input" finding per stage that `applies`, expecting its
    fix to remove REMOVED[code] of the stage's cost, or, for a per-example map, what the
    timed vectorized pipeline shows) and returns its detect."""

    def detect(ctx: Evidence) -> list[Finding]:
        stages = [st for st in ctx.graph.stages if applies(ctx, st)]
        measured = None
        if code in BATCHED:  # one vectorized pipeline: its gain is one stage's to claim
            claims = [st for st in ctx.graph.stages if vectorizable(ctx, st)]
            measured = measured_rewrite(ctx, VECTORIZED, claims)
        out = []
        for st in stages:
            edit = change + _padded_hint(ctx, st) if code == "per_example_parse" else change
            f = stage_finding(ctx, st, code, title, edit, REMOVED[code], measured=measured)
            f.evidence += (
                f"; timed with the rewrite: {number(measured[0])} ex/s" if measured else ""
            )
            _at_least_parallel(ctx, st, f, REMOVED[code])
            out.append(f)
        return out

    detect.__name__ = f"rule_{code}"
    register(Rule(code, "input", priority, detect, rewrites))
    return detect


def sequential_stage(ctx: Evidence, st: lint.GraphStage) -> bool:
    """A map or parse without num_parallel_calls that costs a share worth changing."""
    return (
        st.kind in ("map", "map_batch", "parse")
        and st.parallelism is None
        and ctx.share(st.index) >= MIN_STAGE_SHARE
    )


def _at_least_parallel(ctx: Evidence, st: lint.GraphStage, f: Finding, removed: float) -> None:
    """A change that removes a sequential stage's whole cost (offline, TF ops) gains at
    least what the same stage run in parallel was timed at: its estimate, from stage costs
    that are differences of noisy prefixes, once fell below that timing on a loaded host
    and ranked the lesser change (parallel numpy_function) first."""
    if removed < 1.0 or not sequential_stage(ctx, st):
        return
    parallel = measured_rewrite(
        ctx, PARALLEL, [s for s in ctx.graph.stages if sequential_stage(ctx, s)]
    )
    if parallel is None or parallel[0] <= ctx.pipeline:
        return
    floor = stage_finding(ctx, st, f.code, f.title, f.change, removed, measured=parallel)
    if floor.expected_speedup and floor.expected_speedup > (f.expected_speedup or 0.0):
        f.expected_speedup, f.expected = floor.expected_speedup, floor.expected
        f.saves_wall, f.saves_cpu = floor.saves_wall, floor.saves_cpu
        f.evidence += f"; at least the {number(parallel[0])} ex/s timed with it in parallel"


def _padded_hint(ctx: Evidence, st: lint.GraphStage) -> str:
    """How to parse by batch when the examples are padded_batch'ed (varying lengths)."""
    after = [b for b in ctx.graph.stages if b.index > st.index and b.kind == "batch"]
    if not after or not after[0].padded:
        return ""
    return (
        "; before padded_batch: .batch() the records, parse_example the batch, and pad with "
        "tf.sparse.to_dense on each VarLenFeature's SparseTensor (or .to_tensor() on a "
        "RaggedFeature): the batch's longest, as padded_batch pads"
    )


def per_example_parse(ctx: Evidence, st: lint.GraphStage) -> bool:
    """A parse of one record at a time before a batch, or of variable-length features
    before a bucketing or packing (parse_batched.py parses those per batch too)."""
    if not st.has_parse or st.batched or st.has_py_func:
        return False
    return _batch_after(ctx.graph, st) or st in parse_sites(ctx.graph)


def batchable_map(ctx: Evidence, st: lint.GraphStage) -> bool:
    return (
        _per_example_map(ctx, st)
        and not (st.has_parse or st.has_py_func or st.is_generator)
        and ctx.share(st.index) >= MIN_STAGE_SHARE
        # Not for a file read or image decode (no batched op): parallel instead (last: the
        # pfor trace is the costly check).
        and per_element(ctx, st) is None
    )


def vectorizable(ctx: Evidence, st: lint.GraphStage) -> bool:
    return per_example_parse(ctx, st) or batchable_map(ctx, st)
