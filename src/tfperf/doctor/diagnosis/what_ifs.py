"""The doctor's what-ifs: the compute side timed as it could be (another precision policy,
4x the batch, the step compiled with XLA) and the model fed float32 instead of float64
inputs, each a probe built here and run by diagnose.py after the main measurements; and
the batch the pipeline really yields."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from tfperf.config import RunConfig
from tfperf.doctor.evidence.evidence import (
    COMPUTE_BATCH_VARIANT,
    COMPUTE_VARIANTS,
    PAIRED_COMPUTE,
    PAIRED_TRAINING,
    STEPS_VARIANT,
    THREADS_VARIANT,
    TRAINING_BATCH_VARIANT,
    TRAINING_VARIANTS,
    XLA_VARIANT,
    cpu_count,
)
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import bounded, cache_budget_bytes, ram_budget_bytes
from tfperf.doctor.probes.target import (
    StepTarget,
    build_target,
    compute_probe,
    on_accelerator,
    steps_per_call_in_use,
    train_probe,
)
from tfperf.doctor.rewrites.edits import to_float32
from tfperf.inputs.datasets import make_input_dataset, with_input_threads
from tfperf.measure import Probe, leading_dim, repeat_if_finite
from tfperf.train.precision import supported_policies
from tfperf.train.run_input import first_of
from tfperf.train.xla import host_accelerators

if TYPE_CHECKING:
    import tensorflow as tf


def what_if_probes(
    cfg: RunConfig,
    *,
    graph: lint.DatasetGraph,
    train_ds: tf.data.Dataset,
    batch: int,
    precision: str,
    verdict: str,
    own_pipeline: bool,
    compute_variants: bool,
    errors: dict[str, Exception],
    limit: float | None = None,
    target: StepTarget | None = None,
) -> list[Probe]:
    """Probes of the compute-side what-ifs (other precisions, 4x the batch, XLA, the run's
    own steps per call on `target`) and of float32 inputs, `limit` seconds per repeat; a
    what-if that cannot be built is recorded in `errors`."""
    d = cfg.doctor
    out: list[Probe] = []

    def variant(name: str, make: Callable[[], Probe]) -> None:
        try:
            out.append(make())
        except Exception as exc:  # noqa: BLE001 - a variant that cannot run is only a note
            errors[name] = exc

    # The cheapest first (the budget may end mid-round): the steps what-if reuses the built
    # step; the others build and trace a model each.
    spc = steps_per_call_in_use(cfg)
    if compute_variants and "steps" in d.what_ifs and target is not None:
        if spc is not None and spc < d.steps:
            # The same compiled step, called as the run calls it: each call pays the
            # dispatch and the host round trip once.
            name = f"{STEPS_VARIANT}{spc}"
            variant(name, lambda: compute_probe(name, target, train_ds, d, limit, spc, True))
    # Compute-side what-ifs only matter when the input is not the clear limit.
    if compute_variants and "precision" in d.what_ifs and verdict != "highly input-bound":
        for policy in supported_policies():
            # No CPU has float16 matrix units: emulated, a step takes seconds. (bfloat16
            # has them on recent x86 CPUs: measured.)
            cpu_only = not host_accelerators()
            if policy != precision and not (cpu_only and policy == "mixed_float16"):
                name = f"precision={policy}"
                variant(name, partial(_compute_at, name, cfg, train_ds, batch, policy, limit))
    if compute_variants and "batch" in d.what_ifs:
        # A larger batch pays per-step costs (dispatch, dequeue) once for more examples:
        # the run file's own pipeline rebuilt at 2x and 4x the batch, trained for real.
        for big in (batch * 2, batch * 4):
            if own_pipeline:
                name = f"{TRAINING_BATCH_VARIANT}{big}"
                variant(name, partial(_training_at, name, cfg, big, limit))
            else:
                name = f"{COMPUTE_BATCH_VARIANT}{big}"
                rebatched = train_ds.unbatch().batch(big, drop_remainder=True)
                variant(name, partial(_compute_at, name, cfg, rebatched, big, None, limit))
    step = target.step if target is not None else None
    if step is not None:
        # A step handed over in Python: only the what-ifs it can be timed as (step_fn.py).
        if compute_variants and "xla" in step.variants and verdict != "highly input-bound":
            xla = partial(StepTarget, None, None, precision, batch)
            variant(
                XLA_VARIANT,
                lambda: compute_probe(
                    XLA_VARIANT, xla(step=step.variants["xla"]()), train_ds, d, limit, give_up=True
                ),
            )
    elif compute_variants and "xla" in d.what_ifs and verdict != "highly input-bound":
        if not xla_already_on(cfg):
            name = XLA_VARIANT
            xla_cfg = cfg.model_copy(deep=True)
            xla_cfg.train.jit_compile = True
            variant(name, lambda: _compute_at(name, xla_cfg, train_ds, batch, None, limit))
    if compute_variants and "threads" in d.what_ifs and target is not None:
        # The input and the model on one CPU's cores: the input on half of them may leave
        # the model enough to gain more than the input loses (not when the input is the
        # clear limit, or already has its own pool).
        cores = cpu_count()
        shares_cpu = not on_accelerator() and cores > 1 and cfg.pipeline.threads == "auto"
        if shares_cpu and verdict != "highly input-bound":
            n = max(1, cores // 2)
            name = f"{THREADS_VARIANT}{n}"
            few = with_input_threads(train_ds, n)
            variant(name, lambda: train_probe(name, target, few, d, limit, give_up=True))
    if target is not None and any(p.name.startswith(TRAINING_VARIANTS) for p in out):
        # Interleaved with them, the reference each training what-if is judged against.
        out.insert(0, train_probe(PAIRED_TRAINING, target, train_ds, d, limit))
    if target is not None and any(p.name.startswith(COMPUTE_VARIANTS) for p in out):
        # Interleaved with them, the reference each compute what-if is judged against.
        reference = compute_probe(PAIRED_COMPUTE, target, train_ds, d, limit)
        out.insert(0, reference)
    # A user's own step takes the dtypes its loop feeds it: no float32 what-if.
    if lint.float64_outputs(graph) and (target is None or target.step is None):
        name = "float32 inputs"
        cast = train_ds.map(to_float32)
        variant(name, lambda: _compute_at(name, cfg, cast, batch, None, limit))
    return out


def xla_already_on(cfg: RunConfig) -> bool:
    """The run already compiles its step with XLA: explicitly, or auto on an accelerator."""
    return cfg.train.jit_compile is True or (
        cfg.train.jit_compile == "auto" and bool(host_accelerators())
    )


def _compute_at(
    name: str,
    cfg: RunConfig,
    ds: tf.data.Dataset,
    batch: int,
    precision: str | None = None,
    limit: float | None = None,
) -> Probe:
    target = build_target(cfg, ds.element_spec, batch, precision=precision, sample=first_of(ds))
    return compute_probe(name, target, ds, cfg.doctor, limit, give_up=True)


class IgnoresBatchSize(Exception):
    """The run file's pipeline yields batches of another size than pipeline.batch_size."""


def _training_at(name: str, cfg: RunConfig, batch: int, limit: float | None = None) -> Probe:
    """Training with the run file's pipeline and model at another batch size; a pipeline
    that does not yield batches of that size (it ignores batch_size) gets no such what-if."""
    big = cfg.model_copy(deep=True)
    big.pipeline.batch_size = batch
    ds = make_input_dataset(big, training=True)
    ds = bounded(ds, lint.read_graph(ds), ram_budget_bytes(cfg), cache_budget_bytes(cfg)).dataset
    got = real_batch(ds)
    if got != batch:
        raise IgnoresBatchSize(
            f"the pipeline yields batches of {got} with pipeline.batch_size: {batch} (it "
            "ignores batch_size), so a larger batch cannot be timed"
        )
    ds = repeat_if_finite(ds)
    target = build_target(big, ds.element_spec, batch, sample=first_of(ds))
    return train_probe(name, target, ds, cfg.doctor, limit, give_up=True)


def real_batch(ds: tf.data.Dataset, sample: Callable[[], Any] | None = None) -> int:
    """Examples per element of `ds`: the leading dimension of its elements (from the spec
    when static, else of the first element: `sample()` when given, which may bound the
    pull in time)."""
    import tensorflow as tf

    first = tf.nest.flatten(ds.element_spec)[0]
    shape = getattr(first, "shape", None)
    if shape is not None and shape.rank and shape[0] is not None:
        return int(shape[0])
    return leading_dim(sample() if sample is not None else next(iter(ds)))
