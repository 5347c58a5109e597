"""The input and the model on one CPU: tf.data's shared pool runs a thread per core, and so
does the model's, so each slows the other. Timed on the user's run: training with the
input on its own pool of half the cores (pipeline.threads) beside training as it is, in
paired, interleaved repeats."""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import THREADS_VARIANT, Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.util.format import number, plural

THREADS_GAIN = 1.05  # training with fewer input threads must be this much faster
# The run file's pipeline.threads, or with_options on the user's dataset (the edit).
INPUT_THREADS = Rewrite(
    "input threads",
    "run the pipeline on its own threads: options = tf.data.Options(); "
    "options.threading.private_threadpool_size = N (half the cores, as timed); "
    "options.threading.max_intra_op_parallelism = 1; ds = ds.with_options(options)",
)


def threads_variant(variants: dict[str, float]) -> tuple[str, int] | None:
    """(the what-if's name, its thread count) when it was timed."""
    name = next((k for k in variants if k.startswith(THREADS_VARIANT)), None)
    return None if name is None else (name, int(name.removeprefix(THREADS_VARIANT)))


@rule("input_threads", "compute", 155, rewrites=(INPUT_THREADS,))
def rule_input_threads(ctx: Evidence) -> list[Finding]:
    found = threads_variant(ctx.variants)
    if found is None or not ctx.beats_training(found[0], THREADS_GAIN - 1):
        return []
    name, n = found
    rate = ctx.variants[name]
    gain = rate / max(1e-9, ctx.training)
    return [
        Finding(
            "input_threads",
            "the input takes cores the model needs",
            None,
            f"training {number(ctx.training)} ex/s with the input on every core; "
            f"{number(rate)} ex/s with it on its own {plural(n, 'thread')} ({gain:.2f}x, in "
            f"paired, interleaved repeats): on {ctx.cores} shared cores the model's ops "
            "wait less",
            f"pipeline.threads: {n} (your own pipeline: options = tf.data.Options(); "
            f"options.threading.private_threadpool_size = {n}; "
            "options.threading.max_intra_op_parallelism = 1; ds = ds.with_options(options)); "
            "the results stay the same",
            f"training ~{gain:.1f}x faster",
            gain,
            "compute",
        )
    ]
