"""The doctor's model of training speed from measured costs: the pipeline alone and the model
on one cached batch, each as examples/s and CPU seconds per example, and the host's cores.
On a host without an accelerator input and model run on the same cores, so overlapping them
gives at most cores / (CPU per example of both); with an accelerator the model's step runs
there and the slower of the two sets the pace. A change's expected gain is the model's rate
after it over the model's rate before (the measured training rate is their common scale).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MAX_PIPELINE_GAIN = 50.0  # a stage fix never promises more than this (measured ~50x at best)


@dataclass(frozen=True)
class Costs:
    """Measured rates (examples/s) and CPU time per example (seconds) of the pipeline alone
    and of the model fed one cached batch, and the cores both may use."""

    pipeline: float
    pipeline_cpu: float
    compute: float
    compute_cpu: float
    cores: float  # the cores input and model may use: the host's, less other work's
    accelerator: bool = False  # the model's step runs on a GPU/TPU, not on the host's cores

    def training(self) -> float:
        """Examples/s the model expects of training with input and model overlapped."""
        rate = min(self.pipeline, self.compute)
        cpu = self.pipeline_cpu + (0.0 if self.accelerator else self.compute_cpu)
        if not self.accelerator and cpu > 0:
            rate = min(rate, self.cores / cpu)
        return max(rate, 1e-9)

    def gain(self, after: Costs) -> float:
        """Training after a change over training before, as this model sees both."""
        return after.training() / self.training()

    def pipeline_changed(self, rate: float, cpu: float | None = None) -> Costs:
        """These costs with the pipeline at `rate` examples/s and `cpu` CPU s/example (None:
        the same CPU work, e.g. a map made parallel: faster, not cheaper)."""
        return replace(
            self, pipeline=rate, pipeline_cpu=self.pipeline_cpu if cpu is None else max(cpu, 0)
        )

    def pipeline_without(self, seconds_per_example: float) -> float:
        """Pipeline examples/s once `seconds_per_example` of its wall time is gone."""
        p = self.pipeline
        return 1.0 / max(1.0 / p - seconds_per_example, 1.0 / (p * MAX_PIPELINE_GAIN))

    def compute_changed(self, rate: float) -> Costs:
        """These costs with the compute limit at `rate`: the step's CPU time per example
        scaled with its speed (a faster step on the same cores uses less of them)."""
        cpu = self.compute_cpu * self.compute / max(rate, 1e-9)
        return replace(self, compute=rate, compute_cpu=cpu)

    @property
    def pipeline_cores(self) -> float:
        """Cores the pipeline alone kept busy: CPU seconds per wall second."""
        return self.pipeline_cpu * self.pipeline
