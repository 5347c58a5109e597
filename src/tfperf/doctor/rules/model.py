"""The doctor's rules about the model and the run rather than the pipeline's stages: a batch
too small for the device, a faster precision policy, the step faster under XLA, an input
iterator TensorFlow cannot checkpoint, and input and model needing more CPU than the host
has (scale out to tf.data service workers). Each reads the `Evidence` and measures nothing.
"""

from __future__ import annotations

import math

from tfperf.doctor.evidence.evidence import TRAINING_BATCH_VARIANT, XLA_VARIANT, Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.observe.feed import MODERATELY
from tfperf.train.run_input import EXACT_RESUME_CHANGE, RESUME_WITHOUT_INPUT, stateful_reason
from tfperf.util.format import number, plural

# Compute at 4x the batch must be this much faster per example: a larger batch changes what
# the model learns (its learning rate is tuned again), so it must pay for that. At 1.3x,
# a CNN on 2 busy cores whose 4x batch gained 1.16-1.45x (medians of five runs) was advised
# it in some runs and not in others.
SMALL_BATCH_GAIN = 1.5
PRECISION_GAIN = 1.1  # another policy must be this much faster to be advised
XLA_GAIN = 1.1  # the step under XLA must be this much faster to be advised

LARGER_BATCH = Rewrite("larger batch")  # the run file's pipeline.batch_size, 4x
XLA = Rewrite("XLA")  # the run file's train.jit_compile: true
# A faster precision's trial is named "precision POLICY" (fix/runfile.py): predicted.py
# gives it the precision finding's gain.


def fastest_batch(variants: dict[str, float]) -> tuple[str, int] | None:
    """The batch what-if (2x or 4x the batch) that gave the most examples/s, the smaller on
    a tie: (its variant name, its batch size); None when none was timed. The small_batch
    finding names it and --allow batch applies it."""
    sizes = [k for k in variants if "batch=" in k]
    if not sizes:
        return None
    name = max(sizes, key=lambda k: (variants[k], -int(k.split("=", 1)[1])))
    return name, int(name.split("=", 1)[1])


@rule("small_batch", "compute", 170, rewrites=(LARGER_BATCH,), changes_results=True)
def rule_small_batch(ctx: Evidence) -> list[Finding]:
    fastest = fastest_batch(ctx.variants)
    if fastest is None:
        return []
    name, bigger = fastest
    sizes = [k for k in ctx.variants if "batch=" in k]
    big = ctx.variants[name]
    batch = ctx.graph.batch_size or int(ctx.compute_batch)
    others = "; ".join(
        f"at batch {k.split('=', 1)[1]}: {number(ctx.variants[k])} ex/s" for k in sizes if k != name
    )
    of_training = name.startswith(TRAINING_BATCH_VARIANT)
    if of_training:
        now, what = ctx.training, "training"
        gain = big / max(1e-9, now)
    else:
        now, what = ctx.compute, "compute limit"
        gain = ctx.speedup_compute(big)
    ratio = big / max(1e-9, now)
    beats = ctx.beats_training if of_training else ctx.beats_compute
    if not beats(name, SMALL_BATCH_GAIN - 1):
        return []
    return [
        Finding(
            "small_batch",
            "batch too small for the device",
            None,
            f"{what} at batch {batch}: {number(now)} ex/s; at batch {bigger}: {number(big)} ex/s "
            f"({ratio:.1f}x){'; ' + others if others else ''}: per-step costs (dispatch, "
            "dequeue) dominate",
            f"use a larger batch (pipeline.batch_size: {bigger}) and scale the learning rate "
            "with it (the linear scaling rule: the same factor, after a few epochs of warm-up); "
            "it changes the results",
            f"training ~{gain:.1f}x faster",
            gain,
            "compute",
            new_compute=None if of_training else big,
        )
    ]


@rule("precision", "compute", 160)
def rule_precision(ctx: Evidence) -> list[Finding]:
    current = ctx.compute
    options = {k.split("=", 1)[1]: v for k, v in ctx.variants.items() if k.startswith("precision=")}
    if not options:
        return []
    best, rate = max(options.items(), key=lambda kv: kv[1])
    if not ctx.beats_compute(f"precision={best}", PRECISION_GAIN - 1):
        return []
    gain = ctx.speedup_compute(rate)
    measured = ", ".join(f"{k} {number(v)}" for k, v in options.items())
    return [
        Finding(
            "precision",
            "a faster precision policy is available",
            None,
            f"compute limit: current {number(current)} ex/s; {measured} ex/s (measured on this "
            "machine)",
            f"train.precision: {best} (or auto: measured at start-up)",
            f"training ~{gain:.1f}x faster",
            gain,
            "compute",
            new_compute=rate,
        )
    ]


@rule("xla", "compute", 150, rewrites=(XLA,))
def rule_xla(ctx: Evidence) -> list[Finding]:
    """The train step compiled with XLA, timed on the user's model beside the compute limit."""
    rate = ctx.variants.get(XLA_VARIANT)
    current = ctx.compute
    if rate is None or not ctx.beats_compute(XLA_VARIANT, XLA_GAIN - 1):
        return []
    gain = ctx.speedup_compute(rate)
    return [
        Finding(
            "xla",
            "XLA compiles the train step faster",
            None,
            f"compute limit: {number(current)} ex/s as the run compiles it; "
            f"{number(rate)} ex/s with XLA ({rate / max(1e-9, current):.2f}x, the same model "
            "and batch timed side by side on this machine)",
            "train.jit_compile: true (model.fit: model.compile(..., jit_compile=True)); the "
            "results stay the same up to rounding",
            f"training ~{gain:.1f}x faster",
            gain,
            "compute",
            new_compute=rate,
        )
    ]


@rule("input_not_checkpointable", "resume", 200)
def rule_input_not_checkpointable(ctx: Evidence) -> list[Finding]:
    """A stage TensorFlow cannot save in an iterator: `tfperf train` then trains without
    train.checkpoint_input (not a speed finding: what a resume does)."""
    for st in ctx.graph.stages:
        reason = stateful_reason(st.fn_ops | {st.op}, generator=st.is_generator)
        if reason is None:
            continue
        return [
            Finding(
                "input_not_checkpointable",
                "the input iterator cannot be checkpointed",
                st.label,
                f"{st.label}: {reason}; TensorFlow refuses to save an iterator over it, so "
                "`tfperf train` trains without train.checkpoint_input",
                f"{EXACT_RESUME_CHANGE}; or set train.checkpoint_input=false to accept it",
                f"as it is, {RESUME_WITHOUT_INPUT}",
                None,
                "resume",
                st.index,
            )
        ]
    return []


# Training below this share of min(pipeline, compute) while input-bound: the two compete
# for the host's cores (each alone fits, together they do not).
CPU_SHARED = 0.8


@rule("scale_out", "input", 180, last_resort=True)
def rule_scale_out(ctx: Evidence) -> list[Finding]:
    """Input and model together need more CPU than the host has: preprocessing on tf.data
    service workers (other hosts) frees these cores for the model. Workers needed: the
    compute limit over what one worker gives (the pipeline alone on a host like this one)."""
    both = ctx.training / ctx.limit
    # Either input and model slow each other down on shared cores, or the pipeline alone,
    # on every core, is slower than the model: both need cores this host does not have.
    input_short = ctx.pipeline < ctx.compute
    if ctx.input_bound_fraction < MODERATELY or (both >= CPU_SHARED and not input_short):
        return []
    per_worker = max(1e-9, ctx.pipeline)
    workers = max(1, math.ceil(ctx.compute / per_worker))
    gain = min(workers * per_worker, ctx.compute) / max(1e-9, ctx.training)
    why = (
        f"on {ctx.cores} cores they slow each other down ({both:.0%} of the slower one)"
        if both < CPU_SHARED
        else f"the pipeline alone, on all {ctx.cores} cores, cannot feed the model"
    )
    return [
        Finding(
            "scale_out",
            "input and model need more CPU than this host has",
            None,
            f"training {number(ctx.training)} ex/s ({ctx.input_bound_fraction:.0%} waiting for "
            f"input) while the pipeline alone gives {number(ctx.pipeline)} ex/s and the model "
            f"alone {number(ctx.compute)} ex/s: {why}; a tf.data service worker on a host like "
            f"this gives ~{number(per_worker)} ex/s, so it takes {plural(workers, 'worker')} to "
            "feed the compute limit",
            f"run the pipeline on {plural(workers, 'tf.data service worker')}: pipeline.service: "
            "{address: grpc://DISPATCHER:5050, mode: distributed_epoch} in the run file (or "
            "--set pipeline.service.address=grpc://DISPATCHER:5050 --set "
            "pipeline.service.mode=distributed_epoch); to try it on this machine: "
            f"`tfperf data-service local --workers {workers}` prints the address",
            f"training up to ~{number(min(workers * per_worker, ctx.compute))} ex/s "
            f"(~{gain:.1f}x) with the workers on other hosts",
            gain,
            "input",
        )
    ]
