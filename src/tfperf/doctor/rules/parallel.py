"""The rules about work done one element after another where it could run in parallel: a
map without num_parallel_calls, several files read in turn, parallel stages kept in order
when training does not need it. Their changes spread the same work over more cores: the
expected gain is the stage's cost that parallelism removes, or the rate --fix's rewrite was
timed at (stage_cost.py).
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import PARALLEL, Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.flat_slices import slice_flat_maps
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.doctor.rules.stage_cost import (
    PY_PARALLEL,
    SLOWER,
    measured_rewrite,
    per_element,
    sequential_stage,
    stage_finding,
)
from tfperf.util.format import number, plural

_PARALLEL_EDIT = "pass num_parallel_calls=tf.data.AUTOTUNE to each map and interleave"
MAP_OPTIONS = Rewrite("map parallelization + autotune", _PARALLEL_EDIT, at="parallel")
PARALLEL_MAPS = Rewrite("parallel maps (also py_function)", _PARALLEL_EDIT, at="parallel")
PARALLEL_PREPROCESSING = Rewrite("parallel preprocessing")  # pipeline.preprocess_parallelism
PARALLEL_READS = Rewrite(
    "parallel interleave of file reads",
    "read several files at once: files.interleave(tf.data.TFRecordDataset, "
    "cycle_length=min(files, 16), num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)",
    at="reads",
)
PARALLEL_READS_RUN_FILE = Rewrite("parallel reads")  # pipeline.read_parallelism, interleave_cycle
NONDETERMINISTIC = Rewrite(
    "non-deterministic order",
    "set options = tf.data.Options(); options.deterministic = False; "
    "ds = ds.with_options(options) (training order no longer fixed)",
)


@rule("sequential_map", "input", 100, rewrites=(MAP_OPTIONS, PARALLEL_MAPS, PARALLEL_PREPROCESSING))
def rule_sequential_map(ctx: Evidence) -> list[Finding]:
    out = []
    share = 1.0 - 1.0 / max(1, ctx.cores)
    stages = [st for st in ctx.graph.stages if sequential_stage(ctx, st)]
    measured = measured_rewrite(ctx, PARALLEL, stages)
    if measured is not None and PARALLEL in ctx.slower and measured[0] < SLOWER * ctx.pipeline:
        return []  # timed: parallel maps are slower on this host (overheads, GIL)
    if measured is not None and measured[0] <= ctx.pipeline:
        measured = None  # within the noise (e.g. other jobs on the cores): the estimate
    for st in stages:
        # A Python function holds the GIL; other maps run wholly in parallel (alone: a
        # batched rewrite of the same stage is its own finding, combined in fix/predicted.py).
        left = PY_PARALLEL if st.has_py_func else 1.0
        f = stage_finding(
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
        why = None if st.has_py_func else per_element(ctx, st)
        f.evidence += f"; it cannot run on whole batches: {why}" if why else ""
        out.append(f)
    return out


FLAT_MAP_SLICES = Rewrite(
    "parallel map + unbatch for a flat_map of slices",
    "replace .flat_map(lambda x: tf.data.Dataset.from_tensor_slices(f(x))) by "
    ".map(f, num_parallel_calls=tf.data.AUTOTUNE).unbatch(): the same elements in the same "
    "order, f on several cores",
    at="flat_map",
)


@rule("flat_map_slices", "input", 95, rewrites=(FLAT_MAP_SLICES,))
def rule_flat_map_slices(ctx: Evidence) -> list[Finding]:
    """A flat_map whose function returns from_tensor_slices (a packing loop, windows cut
    from a record): its function runs one element after another, on one core."""
    share = 1.0 - 1.0 / max(1, ctx.cores)
    out = []
    for st in slice_flat_maps(ctx.graph):
        f = stage_finding(
            ctx,
            st,
            "flat_map_slices",
            "flat_map of tensor slices, one element at a time",
            "map the function that makes the tensors in parallel, then unbatch: "
            ".map(f, num_parallel_calls=tf.data.AUTOTUNE).unbatch() instead of "
            ".flat_map(lambda x: tf.data.Dataset.from_tensor_slices(f(x)))",
            share,
            saves_cpu=False,
        )
        f.evidence += f"; {ctx.cores} cores available"
        out.append(f)
    return out


@rule("no_interleave", "input", 90, rewrites=(PARALLEL_READS, PARALLEL_READS_RUN_FILE))
def rule_no_interleave(ctx: Evidence) -> list[Finding]:
    out = []
    for st in ctx.graph.stages:
        sequential = st.kind in ("read", "flat_map") or (
            st.kind == "interleave" and st.parallelism is None
        )
        if st.reads_files and sequential and (st.files or 0) > 1:
            par = min(st.files or 1, ctx.cores)
            f = stage_finding(
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


@rule("deterministic", "input", 130, rewrites=(NONDETERMINISTIC,))
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
