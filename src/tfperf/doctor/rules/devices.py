"""Local accelerators left idle: a host with several GPUs training on one of them. With
tf.distribute's mirrored strategy each device takes a share of the same global batch, so
the results stay those of one device up to rounding; the compute limit scales at best with
the devices (the measured step times their count), and the pipeline then bounds it."""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.util.format import number, plural

MIRRORED = Rewrite("mirrored strategy")  # the run file's strategy: mirrored


@rule("idle_devices", "compute", 175, rewrites=(MIRRORED,))
def rule_idle_devices(ctx: Evidence) -> list[Finding]:
    if ctx.devices <= max(1, ctx.devices_used):
        return []
    n = ctx.devices
    batch = ctx.graph.batch_size or int(ctx.compute_batch)
    scaled = ctx.compute * n / max(1, ctx.devices_used)
    gain = min(ctx.pipeline, scaled) / ctx.limit
    bound = " (the pipeline then sets the pace)" if ctx.pipeline < scaled else ""
    return [
        Finding(
            "idle_devices",
            "accelerators left idle",
            None,
            f"this host has {plural(n, 'accelerator')} and the run trains on "
            f"{ctx.devices_used}: compute limit {number(ctx.compute)} ex/s on one, at best "
            f"~{number(scaled)} ex/s on {n}{bound}; pipeline {number(ctx.pipeline)} ex/s",
            f"train.strategy: mirrored (the same global batch {batch}, {batch // n} per device); "
            "model.fit: build and compile the model inside `with tf.distribute."
            "MirroredStrategy().scope():`",
            f"training up to ~{gain:.1f}x faster",
            gain,
            "compute",
        )
    ]
