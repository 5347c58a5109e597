"""The one way tfperf measures: a pipeline alone, a model fed one cached batch (the compute
limit), and both together, in paired interleaved repeats, judged against the noise.

    probes = [pipeline_probe("before", ds_a, batches=100, warmup=10),
              pipeline_probe("after", ds_b, batches=100, warmup=10)]
    m = side_by_side(probes, repeats=5)
    c = compare(m["before"], m["after"])    # c.ratio, c.low, c.high, c.verdict
    same_examples(ds_a, ds_b)               # the same multiset of examples (examples.py)

`bench`, the doctor, `profile`, `train.compute_limit` and the benchmarks all time through
here. Nothing above TensorFlow and the standard library is imported.
"""

from tfperf.measure.compare import (
    DEFAULT_MIN_GAIN,
    SECOND_LOOK_PAIRS,
    Comparison,
    compare,
    each_pair_gains,
    gain_but_one,
    inverse,
    judge,
    paired_ratios,
    pairs_against,
    promising,
)
from tfperf.measure.examples import ExampleDiff, compare_examples, same_examples
from tfperf.measure.probes import (
    Probe,
    StepRunner,
    batch_rows,
    cached_batch,
    leading_dim,
    measure_datasets,
    measure_one,
    pipeline_probe,
    repeat_if_finite,
    side_by_side,
    training_probe,
)
from tfperf.measure.runs import Measurement, Run, Stat, median_spread

__all__ = [
    "DEFAULT_MIN_GAIN",
    "SECOND_LOOK_PAIRS",
    "Comparison",
    "ExampleDiff",
    "Measurement",
    "median_spread",
    "Probe",
    "Run",
    "Stat",
    "StepRunner",
    "batch_rows",
    "cached_batch",
    "compare",
    "compare_examples",
    "each_pair_gains",
    "gain_but_one",
    "inverse",
    "judge",
    "leading_dim",
    "measure_datasets",
    "measure_one",
    "paired_ratios",
    "pairs_against",
    "pipeline_probe",
    "promising",
    "repeat_if_finite",
    "same_examples",
    "side_by_side",
    "training_probe",
]
