"""What a pipeline fed by a Python generator (from_generator) gains once its data is written to
TFRecord shards: a sample of the generator's elements written with `tfperf.convert`, read
back through tfperf's own pipeline and timed beside the generator; the from_generator
finding then names the exact API call and the measured gain.

It is the doctor's only measurement of a change it cannot make itself (the user's Python
code has to change), hence a module of its own.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.graph import lint

if TYPE_CHECKING:
    import tensorflow as tf

SAMPLE = 2_000  # elements written and read back: a few seconds on 2 cores
SAMPLE_BATCH = 64
LEAST = 4 * SAMPLE_BATCH  # the smallest sample: two timed batches per repeat
SHARDS_NAME = "generated"
SAMPLE_SECONDS = 20.0  # the sample's time without a budget: the first elements, then timing


class NotSampled(Exception):
    """A generator too slow to sample within the time given: the finding stands without."""


@dataclass
class GeneratorSample:
    """The generator's sample and both rates, examples/s (medians of paired repeats)."""

    elements: int
    names: list[str]  # feature names the rows got (the last one is the label)
    generator: float
    shards: float
    folder: str  # where the sample's shards were written

    @property
    def gain(self) -> float:
        return self.shards / max(1e-9, self.generator)

    def api_call(self, out: str = "data/generated") -> str:
        """The call that writes the generator's data once, for the user to run."""
        unpack = ", ".join(self.names)
        row = ", ".join(f"'{n}': {n}" for n in self.names)
        loop = f"for {unpack} in YOUR_GENERATOR()"
        return f"tfperf.convert(({{{row}}} {loop}), '{out}', name='{SHARDS_NAME}')"

    def change(self) -> str:
        label = f" and data.label: {self.names[-1]}" if len(self.names) > 1 else ""
        return (
            f"write the generator's data to TFRecord shards once: `{self.api_call()}` "
            "(YOUR_GENERATOR: the function handed to from_generator; or save the arrays "
            "with numpy.savez('data.npz', ...) and run `tfperf convert data.npz --out "
            f"data/generated`), then read them with tfperf's pipeline: data.dir: "
            f"data/generated{label} in the run file (or tfperf.make_input_dataset(config, "
            "training=True))"
        )

    def evidence(self) -> str:
        return (
            f"measured on a sample of {self.elements:,} elements written to shards: generator "
            f"{self.generator:,.0f} ex/s, the same elements read back through tfperf's "
            f"pipeline {self.shards:,.0f} ex/s ({self.gain:.1f}x)"
        )


def sample_size(steps: int, batch: int) -> int:
    """Elements to sample for a doctor that times `steps` batches of `batch` per repeat:
    twice that, from LEAST to SAMPLE (the default doctor, 30 steps of 64, samples SAMPLE; a
    doctor asked for short measurements samples less)."""
    return max(LEAST, min(SAMPLE, 2 * steps * batch))


def generator_stage(graph: lint.DatasetGraph) -> lint.GraphStage | None:
    return next((s for s in graph.stages if s.is_generator), None)


def feature_names(count: int) -> list[str]:
    """Names for the generator's flat outputs: x, y for (features, label) pairs."""
    if count == 1:
        return ["x"]
    if count == 2:
        return ["x", "y"]
    return [f"x{i}" for i in range(count - 1)] + ["y"]


def _rows(
    ds: tf.data.Dataset, names: list[str], n: int, until: float | None = None
) -> list[dict[str, Any]]:
    """The first `n` elements as rows; fewer when `until` (time.monotonic()) passes first."""
    import tensorflow as tf

    rows = []
    for element in ds.take(n).as_numpy_iterator():
        rows.append(dict(zip(names, tf.nest.flatten(element), strict=True)))
        if until is not None and time.monotonic() > until:
            break
    return rows


def sample_generator(
    graph: lint.DatasetGraph, folder: str | Path, n: int = SAMPLE, seconds: float | None = None
) -> GeneratorSample | None:
    """Writes the first `n` elements of the graph's generator stage to shards in `folder`
    (tfperf.convert), reads them back with tfperf's pipeline and times both side by side.
    None when the pipeline has no generator or its elements cannot become rows. Within
    `seconds`: the elements are read for half of it at most; a generator cut short is
    timed by that read (timing it again would take as long), only the shards side by side;
    NotSampled when fewer than a batch came."""
    from tfperf.config import config_from_dict
    from tfperf.data.convert.run import convert
    from tfperf.inputs.datasets import make_input_dataset
    from tfperf.measure import pipeline_probe, side_by_side

    stage = generator_stage(graph)
    if stage is None:
        return None
    gen = lint.prefix_dataset(graph, stage)
    names = feature_names(len(stage.output_dtypes))
    start = time.monotonic()
    until = None if seconds is None else start + seconds / 2
    rows = _rows(gen, names, n, until)
    read_s = time.monotonic() - start
    if not rows:
        return None
    cut = len(rows) < n
    if cut and len(rows) < SAMPLE_BATCH:
        raise NotSampled(
            f"not measured: the generator yielded {len(rows):,} elements in {read_s:.0f} s, "
            f"fewer than a batch of {SAMPLE_BATCH} within the time budget"
        )
    convert(rows, folder, name=SHARDS_NAME, workers=1, progress=False)
    data = {"dir": str(folder), **({"label": names[-1]} if len(names) > 1 else {})}
    cfg = config_from_dict({"data": data, "pipeline": {"batch_size": SAMPLE_BATCH}})
    shards = make_input_dataset(cfg, training=True)
    batches = max(1, len(rows) // SAMPLE_BATCH // 2)
    probes = [pipeline_probe("shards", shards, batches=batches, warmup=1)]
    if not cut:
        generator = gen.take(len(rows)).batch(SAMPLE_BATCH)
        probes.insert(0, pipeline_probe("generator", generator, batches=batches, warmup=1))
    m = side_by_side(probes, repeats=2)
    rate = {k: v.examples_per_s.median for k, v in m.items()}
    gen_rate = rate["generator"] if not cut else len(rows) / max(1e-9, read_s)
    return GeneratorSample(len(rows), names, gen_rate, rate["shards"], str(folder))


def with_generator_sample(
    findings: list[Finding],
    graph: lint.DatasetGraph,
    n: int = SAMPLE,
    seconds: float | None = None,
) -> list[Finding]:
    """The from_generator finding given the concrete change and the gain measured on a
    sample of `n` elements (in a temporary folder, removed after); the others as they are.
    A sample that cannot be taken leaves the finding as the rule worded it, with the
    reason. `seconds`: its time (default SAMPLE_SECONDS; a generator of a few elements a
    second took minutes for its least sample)."""
    for f in findings:
        if f.code != "from_generator":
            continue
        try:
            with tempfile.TemporaryDirectory(prefix="tfperf-generator-") as tmp:
                secs = SAMPLE_SECONDS if seconds is None else seconds
                sample = sample_generator(graph, Path(tmp) / "shards", n, secs)
        except Exception as exc:  # noqa: BLE001 - the finding stands without its sample
            f.evidence += f"; no sample written ({type(exc).__name__}: {str(exc)[:160]})"
            continue
        if sample is not None:
            f.change = sample.change()
            f.evidence += f"; {sample.evidence()}"
    return findings
