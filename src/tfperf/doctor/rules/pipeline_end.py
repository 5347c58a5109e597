"""The rules about the pipeline's end, what the model receives: no prefetch (input and the
train step take turns) and float64 outputs (twice the bytes of float32, cast every step).
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.util.format import number

PREFETCH_END = Rewrite("prefetch at the end", "end the pipeline with .prefetch(tf.data.AUTOTUNE)")
PREFETCH_RUN_FILE = Rewrite("prefetch")  # pipeline.prefetch: auto
FLOAT32 = Rewrite(
    "float32 outputs",
    "cast float64 outputs to float32 (tf.cast(x, tf.float32)) in the last map",
    at="float32",
)


@rule("no_prefetch", "input", 120, rewrites=(PREFETCH_END, PREFETCH_RUN_FILE))
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


@rule("float64", "data", 140, rewrites=(FLOAT32,))
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
