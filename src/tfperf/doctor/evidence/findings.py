"""What the doctor concludes, as plain data: a `Finding` (evidence, change, expected gain),
the timing of one stage prefix, and the whole `Diagnosis` with its --json form and its
text (the CLI's report: `render_diagnosis`, here beside the data it renders because
`str(diagnosis)` needs it and report/ sits above evidence/). Nothing here measures or
decides."""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfperf.doctor.evidence.cost_model import Costs
from tfperf.measure import Measurement
from tfperf.util.format import WHAT_IF_NOTE, number, rate_figure, spread, what_if_row

TEXT_WIDTH = 100  # the columns str(diagnosis) lays its tables out for (a redirected CLI's)


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
    # expected_speedup's lowest and highest over the ends of the measured rates' repeats
    # (rules/registry.gain_ranges); None: not a speed gain, or one repeat.
    expected_range: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StageTiming:
    index: int
    label: str
    kind: str
    examples_per_s: float | None
    us_per_example: float | None  # time this stage adds per example (median of the rounds)
    error: str | None = None
    # Its interval: the smallest and largest per-round difference of the nested prefixes
    # (clipped at 0: a prefix faster than the one before it is noise, not a negative cost).
    us_low: float | None = None
    us_high: float | None = None

    @property
    def cost_text(self) -> str:
        """'12.3 (8.0-15.1)': the cost with its interval, as every output shows it."""
        return spread(self.us_per_example, self.us_low, self.us_high)


@dataclass(frozen=True)
class Remainder:
    """The pipeline's microseconds per example its stages' costs do not account for, when
    the two disagree beyond their intervals (negative: the stages sum to more)."""

    us_per_example: float  # the whole pipeline's median minus the stages' sum
    low: float
    high: float
    stages_us: float  # the stages' costs summed
    pipeline_us: float  # the whole pipeline's, timed alone

    @property
    def cost_text(self) -> str:
        return spread(self.us_per_example, self.low, self.high)

    @property
    def text(self) -> str:
        return (
            f"unattributed: {self.cost_text} us/example "
            f"(the stages' costs sum to {self.stages_us:.1f} for a pipeline of "
            f"{self.pipeline_us:.1f} us/example)"
        )


def rate_json(m: Measurement) -> dict[str, Any]:
    """The --json form of a measurement: median rates over its repeats with their min-max,
    total timed seconds."""
    rate = m.examples_per_s
    return {
        "examples_per_s": round(rate.median, 1),
        "examples_per_s_range": [round(rate.min, 1), round(rate.max, 1)],
        "examples_per_s_text": rate_text(m),
        "batches_per_s": round(m.batches_per_s.median, 2),
        "examples_per_batch": m.examples_per_batch,
        "seconds": round(m.seconds, 4),
    }


def rate_text(m: Measurement) -> str:
    """'1,234 (1,100-1,300)': the median examples/s with its repeats' min-max."""
    r = m.examples_per_s
    if not any(run.seconds > 0 for run in m.runs):  # abandoned at the budget's end, or none
        return "not measured"
    return rate_figure(r.median, (r.min, r.max))


def training_json(m: Measurement) -> dict[str, Any]:
    """`rate_json` plus the time the train step waited for input and its share."""
    wait = sum(r.wait_seconds for r in m.runs)
    return {
        **rate_json(m),
        "wait_s": round(wait, 4),
        "wall_s": round(m.seconds, 4),
        "input_bound_fraction": round(m.input_bound_fraction, 4),
    }


# Under the rates table when a what-if was paired (diagnosis/what_if_rows.py).
PAIRED_NOTE = (
    "a what-if noted 'Nx of (b)' (or (c)) was timed beside that rate in each round: its rate "
    "is that rate's median times the median of their paired ratios (the least and most in "
    "brackets), its span that median times the least and the most"
)


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
    # variant -> {"text": its rate with its spread, "note": how it was timed} as the rates
    # table shows it (diagnosis/what_if_rows.py); a variant without one shows its rate.
    variants_shown: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    costs: Costs | None = None  # what the expected gains were computed from
    target: float | None = None  # doctor.target: the accelerator's examples/s, when given
    # The stages `slowest_stage` names: one, or those tied within noise with it.
    slowest_stages: list[str] = field(default_factory=list)
    unattributed: Remainder | None = None  # when stages and pipeline disagree
    # "between moderately and not input-bound: 5-14%" when the repeats straddle a threshold.
    verdict_range: str | None = None
    # Why no verdict was drawn: training measured faster than what bounds it, beyond spreads.
    inconsistent: str | None = None
    # The host's cores and other work's busy cores (median, min-max per interval) while the
    # three rates were timed (measure.HostLoad.to_dict), and the cores the cost model gave
    # input and model (free_cores: those left, at least what training kept busy).
    host_load: dict[str, Any] | None = None

    @property
    def variants_caption(self) -> str | None:
        """PAIRED_NOTE when a row of the rates table is a paired what-if, else None."""
        paired = any(
            r.get("note", WHAT_IF_NOTE) != WHAT_IF_NOTE for r in self.variants_shown.values()
        )
        return PAIRED_NOTE if paired else None

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

    @property
    def slowest_marked(self) -> list[str]:
        """The stages the tables mark slowest: the tied ones, or the one named."""
        return self.slowest_stages or ([self.slowest_stage] if self.slowest_stage else [])

    @property
    def input_bound_range(self) -> tuple[float, float]:
        """The per-repeat input-wait fractions' min and max."""
        f = self.training.input_bound_fractions or [self.input_bound_fraction]
        return min(f), max(f)

    @property
    def wait_text(self) -> str:
        """'input wait 9% (5-14% per repeat)': the fraction with its spread."""
        low, high = self.input_bound_range
        frac = self.input_bound_fraction
        if f"{low:.0%}" == f"{high:.0%}":
            return f"input wait {frac:.0%}"
        return f"input wait {frac:.0%} ({low * 100:.0f}-{high:.0%} per repeat)"

    @property
    def verdict_text(self) -> str:
        """The verdict as the reports state it: the boundary statement where the repeats
        straddle a threshold, the inconsistency where no verdict was drawn."""
        if self.inconsistent:
            return f"no verdict: the measurement is inconsistent ({self.inconsistent})"
        return self.verdict_range or self.verdict

    @property
    def headline(self) -> str:
        """The verdict first: input-bound or not, by how much, and which side to work on."""
        alone = self.pipeline.examples_per_s.median
        limit = self.compute.examples_per_s.median
        rates = f"the pipeline alone gives {alone:,.0f} examples/s, the model takes {limit:,.0f}"
        if self.inconsistent:
            return f"{self.verdict_text}; {rates}; measure again on a quieter host"
        if self.verdict.startswith("not measured"):  # a rate abandoned at the budget's end
            return f"verdict: {self.verdict}; {rates} (0: not measured); give a larger budget"
        if self.verdict == "not input-bound":
            side = "work on the model's step (the input keeps up)"
        elif alone < limit:
            side = "work on the input pipeline"
        else:
            side = "work on the input pipeline's share of the CPU (input and model share it)"
        head = f"verdict: {self.verdict_text} ({self.wait_text} of training); {rates}: {side}"
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
            "headline": self.headline,
            "source": self.source,
            "model": self.model,
            "batch_size": self.batch_size,
            "precision": self.precision,
            "verdict": self.verdict,
            "target": self.target,
            "verdict_text": self.verdict_text,
            "verdict_range": self.verdict_range,
            "inconsistent": self.inconsistent,
            "input_bound_fraction": round(self.input_bound_fraction, 4),
            "input_bound_range": [round(v, 4) for v in self.input_bound_range],
            "wait_text": self.wait_text,
            "pipeline": rate_json(self.pipeline),
            "compute_limit": rate_json(self.compute),
            "training": training_json(self.training),
            "stages": [asdict(s) | {"cost_text": s.cost_text} for s in self.stages],
            "slowest_stage": self.slowest_stage,
            "slowest_stages": self.slowest_marked,
            "unattributed": (
                None
                if self.unattributed is None
                else asdict(self.unattributed)
                | {"text": self.unattributed.text, "cost_text": self.unattributed.cost_text}
            ),
            "findings": [f.to_dict() for f in self.findings],
            "variants": {k: round(v, 1) for k, v in self.variants.items()},
            "variants_shown": self.variants_shown,
            "variants_caption": self.variants_caption,
            "notes": self.notes,
            "costs": asdict(self.costs) if self.costs is not None else None,
            "host_load": self.host_load,
        }

    def to_json(self) -> str:
        """The --json form (`to_dict`) as a JSON string."""
        return json.dumps(self.to_dict(), indent=2)

    def __str__(self) -> str:
        """The CLI's text report: verdict, the three rates, stage prefixes, findings, notes."""
        console = Console(
            file=io.StringIO(), width=TEXT_WIDTH, record=True, color_system=None, soft_wrap=True
        )
        render_diagnosis(self, console)
        return console.export_text().rstrip("\n")

    def to_html(self, path: str | Path) -> Path:
        """Writes the diagnosis as one self-contained HTML file (charts and scripts inlined,
        nothing fetched when viewed): the verdict, the three rates on one axis, the stage
        prefixes and the findings. Returns the path."""
        from tfperf.runreport.page import write_doctor_report

        return write_doctor_report(path, diagnosis=self.to_dict())


# ---- the text report ---------------------------------------------------------------------
def render_diagnosis(diag: Diagnosis, console: Console) -> None:
    """The verdict, measurements, stages and findings as rich tables."""
    colour = {"highly": "red", "moderately": "yellow", "not": "green"}.get(
        diag.verdict.split()[0], "yellow"
    )
    # Prose wraps at the console's width (100 columns when stdout is a file).
    console.print(f"[bold {colour}]{escape(diag.headline)}[/]", soft_wrap=False)
    console.print(
        f"[bold]{diag.source}[/] with model [bold]{diag.model}[/] (batch {diag.batch_size}, "
        f"{diag.precision}): [{colour}]{escape(diag.verdict_text)}[/] - {diag.wait_text} of "
        "the training time",
        soft_wrap=False,
    )
    t = Table(title="measured side by side (examples/s)", caption=diag.variants_caption)
    t.add_column("variant")
    t.add_column("examples/s (min-max)", justify="right")
    t.add_column("note")
    t.add_row("(a) pipeline alone", rate_text(diag.pipeline), "")
    t.add_row("(b) model on one cached batch", rate_text(diag.compute), "compute limit")
    t.add_row(
        "(c) training (pipeline + model)",
        rate_text(diag.training),
        diag.wait_text,
    )
    for name, rate in diag.variants.items():
        label, text, note = what_if_row(name, rate, diag.variants_shown.get(name))
        t.add_row(f"    {label}", text, note)
    console.print(t)
    s = Table(title="stage prefixes: the pipeline cut after each stage")
    s.add_column("stage")
    s.add_column("examples/s", justify="right")
    s.add_column("us/example added (per-round range)", justify="right")
    tied = len(diag.slowest_marked) > 1
    for st in diag.stages:
        mark = ""
        if st.label in diag.slowest_marked:
            mark = " [bold red]<- slowest (within noise)[/]" if tied else " [bold red]<- slowest[/]"
        s.add_row(escape(st.label) + mark, number(st.examples_per_s), st.cost_text)
    if diag.unattributed is not None:
        r = diag.unattributed
        s.add_row("unattributed", "", r.cost_text)
    console.print(s)
    if diag.unattributed is not None:
        console.print(diag.unattributed.text, markup=False, highlight=False)
    if tied and diag.slowest_stage:
        console.print(f"slowest stage: {diag.slowest_stage}", markup=False, highlight=False)
    render_findings(diag, console)
    for note in diag.notes:
        console.print(f"[dim]note: {note}[/]")


def render_findings(diag: Diagnosis, console: Console) -> None:
    if not diag.findings:
        why = ": the run is not input-bound, so no input advice"
        console.print("[green]no findings[/]" + (why if diag.verdict == "not input-bound" else ""))
        return
    f = Table(title="findings, most promising first", show_lines=True)
    f.add_column("#", justify="right")
    # Folded, not cut with "...": a run-file key or address longer than its column stays
    # complete (tables are laid out for 100 columns when the report is redirected).
    for name in ("finding", "evidence", "change", "expected"):
        f.add_column(name, overflow="fold")
    for i, fd in enumerate(diag.findings, 1):
        where = f"\n[dim]{fd.stage}[/]" if fd.stage else ""
        title = f"[bold]{fd.code}[/]\n{fd.title}{where}"
        f.add_row(str(i), title, fd.evidence, fd.change, fd.expected)
    console.print(f)
