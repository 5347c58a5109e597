"""measure/runs: one timed repeat (`Run`) and the statistics of all repeats of a variant
(`Measurement`, `Stat`): medians and spreads, runs that timed nothing left out."""

from __future__ import annotations

import pytest

from tfperf.measure.runs import Measurement, Run, Stat, median_spread


def test_measurement_statistics():
    m = Measurement(
        "x",
        [Run(2.0, 4, 400, cpu_seconds=1.0, wait_seconds=0.5), Run(1.0, 2, 300, wait_seconds=0.1)],
    )
    assert m.examples_per_s.median == 250.0
    assert (m.examples_per_s.min, m.examples_per_s.max) == (200.0, 300.0)
    assert m.batches_per_s.median == 2.0
    assert m.cpu_us_per_example.max == pytest.approx(1.0 / 400 * 1e6)
    assert m.examples_per_batch == 700 / 6
    assert m.seconds == 3.0
    assert m.input_bound_fraction == pytest.approx(0.6 / 3.0)
    assert m.to_dict()["runs"][0]["wait_seconds"] == 0.5


def test_a_run_that_timed_nothing_is_left_out_of_the_rates():
    m = Measurement("x", [Run(0.0, 0, 0), Run(2.0, 1, 10), Run(1.0, 1, 30)])
    assert m.examples_per_s.to_dict() == {"median": 17.5, "min": 5.0, "max": 30.0}


def test_no_runs_give_zeros_not_errors():
    m = Measurement("empty")
    assert m.examples_per_s == Stat(0.0, 0.0, 0.0)
    assert m.examples_per_batch == 0 and m.input_bound_fraction == 0.0
    assert m.to_dict()["name"] == "empty" and m.to_dict()["runs"] == []


def test_stat_of_an_even_count_is_the_mean_of_the_middle_two():
    assert Stat.of([4.0, 1.0, 3.0, 2.0]) == Stat(2.5, 1.0, 4.0)


def _rates(name: str, *per_s: float) -> Measurement:
    return Measurement(name, [Run(1.0, 1, int(r)) for r in per_s])


def test_the_runs_noise_is_the_median_spread_of_its_rates_timed_twice_or_more():
    # One wild rate (3x) among steadier ones does not set the run's noise.
    rates = [
        _rates("pipeline", 100, 300, 200),
        _rates("stage a", 100, 120),
        _rates("stage b", 100, 110, 105),
        _rates("once", 100),  # one repeat: no spread to count
        Measurement("none", [Run(0.0, 0, 0), Run(0.0, 0, 0)]),  # nothing timed
    ]
    assert median_spread(rates) == pytest.approx(1.2)
    assert median_spread([_rates("once", 100)]) == 1.0
    assert median_spread([]) == 1.0
