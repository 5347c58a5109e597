"""The doctor's rules about the pipeline's stages: what each stage costs and the change that
removes it (a Python function or generator, a per-example parse or map, a sequential map,
files read one after another, no prefetch, no cache, float64 outputs, deterministic
order). Each reads the `Evidence` and measures nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from tfperf.doctor.evidence.evidence import PARALLEL, VECTORIZED, Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.cache import source_shuffle
from tfperf.doctor.rewrites.pfor_fn import Refused
from tfperf.doctor.rewrites.vectorize import refusal
from tfperf.util.format import number, plural

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


def _stage_finding(
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


def _fixed_share(ctx: Evidence, st: lint.GraphStage) -> float:
    """Share of a stage's cost that a more specific finding already removes."""
    if st.is_generator:
        return REMOVED["from_generator"]
    if st.has_py_func:
        return REMOVED["py_function"]
    if st.has_parse and not st.batched:
        return REMOVED["per_example_parse"]
    if _per_example_map(ctx, st) and _per_element(ctx, st) is None:
        return REMOVED["per_example_map"]
    return 0.0


def _batch_after(graph: lint.DatasetGraph, st: lint.GraphStage) -> bool:
    return any(s.kind in ("batch", "map_batch") for s in graph.stages[st.index + 1 :])


def _per_example_map(ctx: Evidence, st: lint.GraphStage) -> bool:
    return st.kind == "map" and not st.batched and _batch_after(ctx.graph, st)


def _per_element(ctx: Evidence, st: lint.GraphStage) -> Refused | None:
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


def _stage_rule(
    code: str, title: str, change: str, applies: Callable[[Evidence, lint.GraphStage], bool]
) -> Callable[[Evidence], list[Finding]]:
    """A rule finding each stage that `applies`, expecting its fix to remove REMOVED[code]
    of the stage's cost (or, for a per-example map, what the timed vectorized pipeline
    shows)."""

    def rule(ctx: Evidence) -> list[Finding]:
        stages = [st for st in ctx.graph.stages if applies(ctx, st)]
        measured = None
        if code in BATCHED:  # one vectorized pipeline: its gain is one stage's to claim
            claims = [st for st in ctx.graph.stages if _vectorizable(ctx, st)]
            measured = measured_rewrite(ctx, VECTORIZED, claims)
        out = []
        for st in stages:
            edit = change + _padded_hint(ctx, st) if code == "per_example_parse" else change
            f = _stage_finding(ctx, st, code, title, edit, REMOVED[code], measured=measured)
            f.evidence += (
                f"; timed with the rewrite: {number(measured[0])} ex/s" if measured else ""
            )
            out.append(f)
        return out

    rule.__name__ = f"rule_{code}"
    return rule


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


rule_py_function = _stage_rule(
    "py_function",
    "Python function (py_function/numpy_function) in the pipeline",
    "compute it once offline and store the result in TFRecords (offline preprocessing: "
    "`tfperf convert`, the workload's offline_preprocess), or rewrite it with TensorFlow ops",
    lambda ctx, st: st.has_py_func and not st.is_generator,
)
rule_from_generator = _stage_rule(
    "from_generator",
    "data fed from a Python generator (from_generator)",
    "write the data to TFRecord shards (`tfperf convert`) or build it in the graph "
    "(from_tensor_slices / tf ops); every element now takes a Python round trip under the GIL",
    lambda ctx, st: st.is_generator,
)


def _per_example_parse(ctx: Evidence, st: lint.GraphStage) -> bool:
    return st.has_parse and not st.batched and not st.has_py_func and _batch_after(ctx.graph, st)


def _batchable_map(ctx: Evidence, st: lint.GraphStage) -> bool:
    return (
        _per_example_map(ctx, st)
        and not (st.has_parse or st.has_py_func or st.is_generator)
        and ctx.share(st.index) >= MIN_STAGE_SHARE
        # Not for a file read or image decode (no batched op): parallel instead (last: the
        # pfor trace is the costly check).
        and _per_element(ctx, st) is None
    )


def _vectorizable(ctx: Evidence, st: lint.GraphStage) -> bool:
    return _per_example_parse(ctx, st) or _batchable_map(ctx, st)


rule_per_example_parse = _stage_rule(
    "per_example_parse",
    "Examples parsed one at a time before batch",
    "batch first, then parse the whole batch with one tf.io.parse_example (run file: "
    "pipeline.parse: batched)",
    _per_example_parse,
)
rule_per_example_map = _stage_rule(
    "per_example_map",
    "per-example map that could run on batches",
    "move the map after batch() and write it for a batch (vectorized): the per-call "
    "overhead (~20 us) is then paid once per batch",
    _batchable_map,
)


def _sequential(ctx: Evidence, st: lint.GraphStage) -> bool:
    return (
        st.kind in ("map", "map_batch", "parse")
        and st.parallelism is None
        and ctx.share(st.index) >= MIN_STAGE_SHARE
    )


def rule_sequential_map(ctx: Evidence) -> list[Finding]:
    out = []
    share = 1.0 - 1.0 / max(1, ctx.cores)
    stages = [st for st in ctx.graph.stages if _sequential(ctx, st)]
    measured = measured_rewrite(ctx, PARALLEL, stages)
    if measured is not None and PARALLEL in ctx.slower and measured[0] < SLOWER * ctx.pipeline:
        return []  # timed: parallel maps are slower on this host (overheads, GIL)
    if measured is not None and measured[0] <= ctx.pipeline:
        measured = None  # within the noise (e.g. other jobs on the cores): the estimate
    for st in stages:
        # A Python function holds the GIL; other maps run wholly in parallel (alone: a
        # batched rewrite of the same stage is its own finding, combined in fix/predicted.py).
        left = PY_PARALLEL if st.has_py_func else 1.0
        f = _stage_finding(
            ctx,
            st,
            "sequential_map",
            "map without parallelism",
            "pass num_parallel_calls=tf.data.AUTOTUNE (run file: "
            "pipeline.preprocess_parallelism: auto)",
            share * left,
            saves_cpu=False,
            measured=measured,
        )
        f.evidence += f"; {ctx.cores} cores available"
        f.evidence += f"; timed in parallel: {number(measured[0])} ex/s" if measured else ""
        why = None if st.has_py_func else _per_element(ctx, st)
        f.evidence += f"; it cannot run on whole batches: {why}" if why else ""
        out.append(f)
    return out


def rule_no_interleave(ctx: Evidence) -> list[Finding]:
    out = []
    for st in ctx.graph.stages:
        sequential = st.kind in ("read", "flat_map") or (
            st.kind == "interleave" and st.parallelism is None
        )
        if st.reads_files and sequential and (st.files or 0) > 1:
            par = min(st.files or 1, ctx.cores)
            f = _stage_finding(
                ctx,
                st,
                "no_interleave",
                f"{st.files} files read one after another",
                "read several files at once: files.interleave(TFRecordDataset, "
                "cycle_length=min(files, 16), num_parallel_calls=AUTOTUNE)",
                1.0 - 1.0 / par,
                saves_cpu=False,
            )
            out.append(f)
    return out


def rule_no_prefetch(ctx: Evidence) -> list[Finding]:
    last = [s for s in ctx.graph.stages if s.kind != "options"][-1]
    if last.kind == "prefetch":
        return []
    # Overlapped, training reaches what the cost model allows (shared cores included).
    overlapped = ctx.costs.training()
    gain = max(1.0, overlapped / max(1e-9, ctx.training))
    return [
        Finding(
            "no_prefetch",
            "no prefetch at the end of the pipeline",
            last.label,
            f"training {number(ctx.training)} ex/s with input and compute taking "
            f"turns; pipeline {number(ctx.pipeline)} ex/s, compute limit "
            f"{number(ctx.compute)} ex/s",
            "end the pipeline with .prefetch(tf.data.AUTOTUNE) (run file: pipeline.prefetch: auto)",
            f"input overlaps the step: training ~{number(overlapped)} ex/s (~{gain:.1f}x)",
            gain,
            "input",
            last.index,
        )
    ]


def rule_no_cache(ctx: Evidence) -> list[Finding]:
    if ctx.cache_candidate is None or any(s.kind == "cache" for s in ctx.graph.stages):
        return []
    last, n, size = ctx.cache_candidate
    prefix = [s for s in ctx.graph.stages if s.index <= last.index]
    if size > ctx.budget or not any(s.kind in WORK_KINDS for s in prefix):
        return []
    # Count only what the stage's own, more specific fix would leave.
    cost = sum(ctx.stage_cost(s.index) * (1.0 - _fixed_share(ctx, s)) for s in prefix)
    if cost * ctx.pipeline < MIN_CACHE_SHARE:
        return []
    new_p = ctx.pipeline_without(cost)
    gain = ctx.speedup_pipeline(new_p, ctx.cpu_of(cost))
    return [
        Finding(
            "no_cache",
            "expensive deterministic work repeated every epoch",
            last.label,
            f"stages up to {last.label} are deterministic and cost {cost * 1e6:.1f} us per example "
            f"(~{min(cost * ctx.pipeline, 1):.0%} of the pipeline); their {n:,} "
            f"elements take ~{size / 2**20:,.1f} MiB (budget {ctx.budget / 2**20:,.0f} MiB)",
            f"add .cache() after {last.label} (before any shuffle or random augmentation; run "
            "file: pipeline.cache_preprocessed: true)"
            + (
                f"; {moved.label} shuffles the source: shuffle after the cache instead "
                "(e.g. list_files(..., shuffle=False), then .cache().shuffle(number of elements))"
                if (moved := source_shuffle(ctx.graph)) is not None
                else ""
            ),
            f"epochs after the first: pipeline ~{number(new_p)} ex/s; training ~{gain:.1f}x faster",
            gain,
            "input",
            last.index,
            saves_wall=cost,
            saves_cpu=ctx.cpu_of(cost),
        )
    ]


def rule_float64(ctx: Evidence) -> list[Finding]:
    paths = lint.float64_outputs(ctx.graph)
    if not paths:
        return []
    c32 = ctx.variants.get("float32 inputs")
    gain = ctx.speedup_compute(c32) if c32 else None
    measured = (
        (f"; compute limit with float32 inputs {number(c32)} ex/s vs {number(ctx.compute)} ex/s")
        if c32
        else ""
    )
    return [
        Finding(
            "float64",
            "float64 tensors leave the pipeline",
            ctx.graph.output.label,
            f"float64 outputs: {', '.join(paths)} (twice the bytes of float32 to copy to the "
            f"device; the model casts them every step){measured}",
            "cast to float32 inside the pipeline, in the batched map (the chess workload's "
            "original used float64 throughout)",
            "half the input bytes" + (f"; training ~{gain:.2f}x" if gain else ""),
            gain,
            "data",
            ctx.graph.output.index,
            new_compute=c32,
        )
    ]


def rule_deterministic(ctx: Evidence) -> list[Finding]:
    stages = lint.deterministic_stages(ctx.graph)
    if not stages:
        return []
    nd = ctx.nondeterministic_rate
    gain = ctx.speedup_pipeline(nd) if nd else None
    return [
        Finding(
            "deterministic",
            "deterministic element order in training",
            ", ".join(s.label for s in stages),
            f"{plural(len(stages), 'parallel stage')} keep input order; pipeline "
            f"{number(ctx.pipeline)} ex/s, with deterministic=False {number(nd, missing='?')} ex/s",
            "set options.deterministic = False for training (run file: pipeline.deterministic: "
            "false): a slow element no longer holds back the ones behind it",
            f"training ~{gain:.2f}x" if gain else "fewer stalls behind slow elements",
            gain,
            "input",
            stages[0].index,
            saves_wall=(1.0 / ctx.pipeline - 1.0 / nd) if nd else None,
        )
    ]
