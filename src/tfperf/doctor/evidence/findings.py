"""What the doctor concludes, as plain data: a `Finding` (evidence, change, expected gain),
the timing of one stage prefix, and the whole `Diagnosis` with its --json form. Nothing
here measures or decides."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tfperf.doctor.evidence.cost_model import Costs
from tfperf.measure import Measurement


@dataclass
class Finding:
    code: str
    title: str
    stage: str | None  # the stage's label, when the finding is about one stage
    evidence: str  # the numbers behind it
    change: str  # what to change, concretely
    expected: str  # the gain it expects, in words
    expected_speedup: float | None  # training examples/s after / before (None: not a speed gain)
    kind: str  # "risk" (RAM), "input", "compute", "data", "resume" (what a resume loses)
    stage_index: int | None = None
    # What the change does to the measured costs, for the cost model (cost_model.py): wall
    # and CPU seconds per example the pipeline saves, the compute limit after it.
    saves_wall: float | None = None
    saves_cpu: float | None = None
    new_compute: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StageTiming:
    index: int
    label: str
    kind: str
    examples_per_s: float | None
    us_per_example: float | None  # time this stage adds per example
    error: str | None = None


def rate_json(m: Measurement) -> dict[str, float]:
    """The --json form of a measurement: median rates over its repeats, total timed seconds."""
    return {
        "examples_per_s": round(m.examples_per_s.median, 1),
        "batches_per_s": round(m.batches_per_s.median, 2),
        "examples_per_batch": m.examples_per_batch,
        "seconds": round(m.seconds, 4),
    }


def training_json(m: Measurement) -> dict[str, float]:
    """`rate_json` plus the time the train step waited for input and its share."""
    wait = sum(r.wait_seconds for r in m.runs)
    return {
        **rate_json(m),
        "wait_s": round(wait, 4),
        "wall_s": round(m.seconds, 4),
        "input_bound_fraction": round(m.input_bound_fraction, 4),
    }


@dataclass
class Diagnosis:
    """Everything `tfperf doctor` measured and concluded."""

    source: str
    model: str
    batch_size: int
    precision: str
    pipeline: Measurement  # (a) the pipeline alone
    compute: Measurement  # (b) the model fed one cached batch: the compute limit
    training: Measurement  # (c) both together, with the input wait
    stages: list[StageTiming]
    slowest_stage: str | None
    verdict: str
    findings: list[Finding]
    variants: dict[str, float] = field(default_factory=dict)  # variant -> examples/s
    notes: list[str] = field(default_factory=list)
    costs: Costs | None = None  # what the expected gains were computed from
    target: float | None = None  # doctor.target: the accelerator's examples/s, when given

    @property
    def input_bound_on_target(self) -> bool:
        """The pipeline alone is slower than the target's accelerator would consume."""
        return self.target is not None and self.pipeline.examples_per_s.median < self.target

    @property
    def input_trials(self) -> bool:
        """Whether --fix tries input changes: this host waits for input, or the target
        says the accelerator will."""
        return self.verdict != "not input-bound" or self.input_bound_on_target

    @property
    def input_bound_fraction(self) -> float:
        return self.training.input_bound_fraction

    def headline(self) -> str:
        """The verdict first: input-bound or not, by how much, and which side to work on."""
        alone = self.pipeline.examples_per_s.median
        limit = self.compute.examples_per_s.median
        rates = f"the pipeline alone gives {alone:,.0f} examples/s, the model takes {limit:,.0f}"
        if self.verdict == "not input-bound":
            side = "work on the model's step (the input keeps up)"
        elif alone < limit:
            side = "work on the input pipeline"
        else:
            side = "work on the input pipeline's share of the CPU (input and model share it)"
        head = (
            f"verdict: {self.verdict} (input wait {self.input_bound_fraction:.0%} of "
            f"training); {rates}: {side}"
        )
        if self.target is None:
            return head
        if self.input_bound_on_target:
            workers = math.ceil(self.target / max(1e-9, alone))
            return (
                f"verdict: input-bound on the target: the pipeline alone gives {alone:,.0f} "
                f"examples/s; the target needs {self.target:,.0f} (~{workers} tf.data service "
                f"workers like this host, or a faster pipeline); on this host: {head}"
            )
        return (
            f"verdict: the pipeline keeps up with the target ({alone:,.0f} >= "
            f"{self.target:,.0f} examples/s); on this host: {head}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "headline": self.headline(),
            "source": self.source,
            "model": self.model,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "verdict": self.verdict,
            "target": self.target,
            "input_bound_fraction": round(self.input_bound_fraction, 4),
            "pipeline": rate_json(self.pipeline),
            "compute_limit": rate_json(self.compute),
            "training": training_json(self.training),
            "stages": [asdict(s) for s in self.stages],
            "slowest_stage": self.slowest_stage,
            "findings": [f.to_dict() for f in self.findings],
            "variants": {k: round(v, 1) for k, v in self.variants.items()},
            "notes": self.notes,
            "costs": asdict(self.costs) if self.costs is not None else None,
        }

    def to_html(self, path: str | Path) -> Path:
        """Writes the diagnosis as one self-contained HTML file (charts and scripts inlined,
        nothing fetched when viewed): the verdict, the three rates on one axis, the stage
        prefixes and the findings. Returns the path."""
        from tfperf.runreport.page import write_doctor_report

        return write_doctor_report(path, diagnosis=self.to_dict())
