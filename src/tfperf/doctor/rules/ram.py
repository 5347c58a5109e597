"""The doctor's rule about RAM: a shuffle buffer the graph shows to be larger than the RAM
budget (sized with the plan the pipeline itself applies). It reads the `Evidence` and
measures nothing; probes/bounded.py keeps the doctor from ever filling such a buffer.
"""

from __future__ import annotations

from tfperf.data.pipeline import SHUFFLE_OVERHEAD_BYTES, plan_shuffle_buffer
from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rules.registry import Rewrite, rule

CAP_SHUFFLE = Rewrite(
    "cap shuffle buffers at the RAM budget",
    "pass .shuffle() a buffer_size the RAM budget holds (the sizes --fix printed)",
    at="shuffle",
)


@rule("shuffle_over_budget", "risk", 10, rewrites=(CAP_SHUFFLE,))
def rule_shuffle_budget(ctx: Evidence) -> list[Finding]:
    out = []
    for st in ctx.graph.stages:
        per = ctx.shuffle_bytes.get(st.index)
        if st.kind != "shuffle" or per is None or not st.buffer_size or st.buffer_size < 0:
            continue
        plan = plan_shuffle_buffer(st.buffer_size, per, ctx.budget / 2**20)
        if plan.granted >= plan.requested:
            continue
        out.append(
            Finding(
                "shuffle_over_budget",
                "shuffle buffer larger than the RAM budget",
                st.label,
                f"{st.buffer_size:,} elements x {per:,} B (+{SHUFFLE_OVERHEAD_BYTES} B each) = "
                f"{plan.requested_bytes / 2**20:,.1f} MiB; budget {ctx.budget / 2**20:,.1f} MiB "
                "(pipeline.shuffle_ram_mb, at most half the free RAM)",
                f"shuffle with a buffer of at most {plan.granted:,} elements, and shuffle the file "
                "order so that a smaller buffer still mixes well",
                "no swapping (records swapped to disk starve the model)",
                None,
                "risk",
                st.index,
            )
        )
    return out
