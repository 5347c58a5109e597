"""What the doctor's rules read: the `Evidence` (the graph, the measured rates and CPU times)
with what they share of the cost model (a stage's share of the pipeline's time, the pipeline
without it, the training speedup through cost_model.Costs), the verdict (how input-bound the
run is) and the host's cores. Nothing here measures: diagnosis/ gathers the evidence.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from tfperf.doctor.evidence.cost_model import Costs
from tfperf.doctor.evidence.findings import StageTiming
from tfperf.doctor.graph import lint
from tfperf.doctor.graph.user_source import UserSource
from tfperf.measure import Comparison, each_pair_gains, gain_but_one, inverse

# The pipeline alone with --fix's first rewrites, timed by the diagnosis (Evidence.rewritten).
VECTORIZED, PARALLEL = "pipeline vectorized", "pipeline parallel maps"
# The compute-side what-if of the train step compiled with XLA (Evidence.variants' key).
XLA_VARIANT = "jit_compile=true"
# The compute-side what-if of the run's own steps per call (Evidence.variants' key prefix;
# the compute limit itself runs doctor.steps per call).
STEPS_VARIANT = "steps per call="
# The compute limit timed again in the what-ifs' rounds, interleaved with them: each compute
# what-if is judged by its paired ratios to it (measure.compare), not by medians of phases
# timed minutes apart on a shared host.
PAIRED_COMPUTE = "compute limit (paired)"
# A larger batch (Evidence.variants' key prefix, then the batch size): trained for real when
# the doctor builds the run file's own pipeline at it, else the compute limit on the user's
# batches rebatched. Paired like the others: by medians of separate phases, a 1.3x gain came
# and went between runs beside two CPU hogs.
TRAINING_BATCH_VARIANT = "training at batch="
COMPUTE_BATCH_VARIANT = "compute at batch="
COMPUTE_VARIANTS = ("precision=", XLA_VARIANT, STEPS_VARIANT, COMPUTE_BATCH_VARIANT)
# Training with the input on its own pool of N threads (pipeline.threads), judged likewise
# against training timed in the same rounds.
THREADS_VARIANT = "input threads="
PAIRED_TRAINING = "training (paired)"
# What-ifs of training (timed in training's rounds), not of the compute limit.
TRAINING_VARIANTS = (THREADS_VARIANT, TRAINING_BATCH_VARIANT)


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass
class Evidence:
    """What the rules read: the graph and the measured rates (examples/s, medians over
    repeats)."""

    graph: lint.DatasetGraph
    pipeline: float  # (a) the pipeline alone
    compute: float  # (b) the compute limit
    training: float  # (c) both together
    input_bound_fraction: float  # of (c)
    compute_batch: float  # examples per batch of (b)
    stages: list[StageTiming]
    variants: dict[str, float]
    budget: int  # bytes a shuffle buffer may hold
    cache_budget: int  # bytes an in-memory cache may hold (probes/bounded.cache_budget_bytes)
    shuffle_bytes: dict[int, int]  # stage index -> bytes per buffered element
    cache_candidate: tuple[lint.GraphStage, int, int] | None  # (last stage, elements, bytes)
    nondeterministic_rate: float | None
    cores: int = field(default_factory=cpu_count)
    # The cores other work on the host left while the rates were timed (measure.HostLoad);
    # the cost model's shared cores when known: beside two CPU busy loops on 2 cores,
    # jena_window_generator's training kept 1.0 core busy, and its model at 2 cores said
    # training could reach the compute limit (1.4x) where the cores left allowed 1.0x.
    free_cores: float | None = None
    busy_host: bool = False  # other work kept measure.host_load.BUSY cores or more busy
    source: UserSource | None = None  # the user's data.pipeline function, for file:line
    # The pipeline is the user's code (a data.pipeline function, a dataset handed to the API):
    # the run file's pipeline.* keys (prefetch, parse, ...) do not reach it.
    users_code: bool = False
    pipeline_cpu: float = 0.0  # CPU seconds per example of (a), all threads (0: unknown)
    # The run's noise (measure/runs.py median_spread: the median of every rate's slowest to
    # fastest repeat): expected gains come from rates this noisy, so gains closer than this
    # are a tie (rules/registry.py tie_factor).
    spread: float = 1.0
    # (a)'s and (b)'s slowest and fastest repeats (None: one repeat, or not known): the ends
    # an expected gain may reach on this host's noise (corners, rules/registry.gain_ranges).
    pipeline_range: tuple[float, float] | None = None
    compute_range: tuple[float, float] | None = None
    compute_cpu: float = 0.0  # CPU seconds per example of (b)
    accelerator: bool = False  # the model runs on a GPU/TPU: it does not share the host's cores
    # Local accelerators (GPUs, TPU cores) and how many the run trains on.
    devices: int = 0
    devices_used: int = 1
    steps_per_call: int = 1  # steps per compiled call of the compute limit (doctor.steps)
    # VECTORIZED / PARALLEL -> (examples/s, CPU s per example) of the pipeline alone so
    # rewritten, when the diagnosis timed it: the cost model reads them, not estimates.
    rewritten: dict[str, tuple[float, float]] = field(default_factory=dict)
    # The rewrites that every paired repeat timed slower than the pipeline (measure.compare),
    # twice (rewritten.confirmed_slower): a median of a few short repeats flips on a busy host.
    slower: set[str] = field(default_factory=set)
    # Shuffle stage -> bytes per element before the maps it could precede (lint.maps_before).
    shuffle_early_bytes: dict[int, int] = field(default_factory=dict)
    # Compute what-if -> its paired comparison against PAIRED_COMPUTE (B = the what-if).
    paired: dict[str, Comparison] = field(default_factory=dict)

    def beats_compute(self, name: str, min_gain: float) -> bool:
        """Whether what-if `name` is faster than the compute limit beyond the noise: their
        paired ratios' median at least 1 + min_gain, and every ratio above 1 or all but one
        of SECOND_LOOK_PAIRS or more (diagnose's second look: beside two CPU hogs a ~1.3x
        XLA gain had one of three pairs below 1 in one run of five); by medians when it was
        not paired."""
        c = self.paired.get(name)
        if c is None:
            return self.variants.get(name, 0.0) >= (1 + min_gain) * self.compute
        return _beats(c, min_gain)

    def beats_training(self, name: str, min_gain: float) -> bool:
        """Whether training what-if `name` is faster than training beyond the noise (as
        beats_compute)."""
        c = self.paired.get(name)
        if c is None:
            return self.variants.get(name, 0.0) >= (1 + min_gain) * self.training
        return _beats(c, min_gain)

    def loses_to_compute(self, name: str, min_gain: float) -> bool:
        """Whether what-if `name` is slower than the compute limit by `min_gain` in each
        paired repeat (measure.each_pair_gains, the limit's gain over it); by medians when
        it was not paired."""
        c = self.paired.get(name)
        if c is None:
            return self.compute >= (1 + min_gain) * self.variants.get(name, float("inf"))
        return each_pair_gains(inverse(c), min_gain)

    def corners(self) -> list[Evidence]:
        """This evidence at the two ends of its rates' repeats: the pipeline alone at its
        slowest and the compute limit at its fastest, each stage at its costliest round and
        each what-if of the model at its smallest ratio (the input's changes worth the
        most), then the reverse. Empty when a range is not known."""
        if self.pipeline_range is None or self.compute_range is None:
            return []
        (p_low, p_high), (c_low, c_high) = self.pipeline_range, self.compute_range

        def stages(costliest: bool) -> list[StageTiming]:
            return [
                replace(st, us_per_example=end)
                if (end := st.us_high if costliest else st.us_low) is not None
                else st
                for st in self.stages
            ]

        def variants(compute: float, least: bool) -> dict[str, float]:
            # The model's what-ifs ran in the compute limit's rounds: they scale with it, a
            # paired one at the end of its paired ratios (the least, or the most, it gained),
            # another the run's noise further.
            # (A what-if of training is paired with training, which stays as measured.)
            out = dict(self.variants)
            for k, v in self.variants.items():
                of_training = k.startswith(TRAINING_VARIANTS)
                if (c := self.paired.get(k)) is not None:
                    out[k] = (self.training if of_training else compute) * (
                        c.low if least else c.high
                    )
                elif not of_training:  # timed once per round: the run's noise apart
                    noise = 1 / self.spread if least else self.spread
                    out[k] = v * compute / max(self.compute, 1e-9) * noise
            return out

        def at(pipeline: float, compute: float, input_worst: bool) -> Evidence:
            return replace(
                self,
                pipeline=pipeline,
                compute=compute,
                stages=stages(input_worst),
                variants=variants(compute, least=input_worst),
            )

        return [at(p_low, c_high, True), at(p_high, c_low, False)]

    @property
    def limit(self) -> float:
        return max(1e-9, min(self.pipeline, self.compute))

    def stage_cost(self, index: int) -> float:
        for st in self.stages:
            if st.index == index and st.us_per_example is not None:
                return st.us_per_example * 1e-6
        return 0.0

    def share(self, index: int) -> float:
        """Share of the pipeline's time spent in one stage."""
        return min(1.0, self.stage_cost(index) * self.pipeline)

    @property
    def costs(self) -> Costs:
        return Costs(
            self.pipeline,
            self.pipeline_cpu,
            self.compute,
            self.compute_cpu,
            self.cores if self.free_cores is None else self.free_cores,
            self.accelerator,
        )

    def pipeline_without(self, seconds_per_example: float) -> float:
        """Pipeline examples/s once `seconds_per_example` of stage time is gone."""
        return self.costs.pipeline_without(seconds_per_example)

    def cpu_of(self, seconds_per_example: float) -> float:
        """CPU seconds per example behind `seconds_per_example` of the pipeline's wall time
        (the pipeline alone keeps `costs.pipeline_cores` cores busy)."""
        return seconds_per_example * self.costs.pipeline_cores

    def speedup_pipeline(self, new_pipeline: float, cpu_saved: float = 0.0) -> float:
        """Training after / before with the pipeline at `new_pipeline` examples/s, its work
        `cpu_saved` CPU seconds per example cheaper (0: the same work, done in parallel)."""
        c = self.costs
        return c.gain(c.pipeline_changed(new_pipeline, c.pipeline_cpu - cpu_saved))

    def speedup_compute(self, new_compute: float) -> float:
        c = self.costs
        return c.gain(c.compute_changed(new_compute))


def _beats(c: Comparison, min_gain: float) -> bool:
    """A paired gain of at least `min_gain` with every pair above 1, or all but one of
    SECOND_LOOK_PAIRS or more."""
    return c.ratio >= 1 + min_gain and (c.low > 1.0 or gain_but_one(c, min_gain))
