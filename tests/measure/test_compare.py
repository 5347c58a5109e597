"""The noise-aware comparison: paired ratios and the sign rule, table-driven."""

from __future__ import annotations

import pytest

from tfperf.measure import (
    Comparison,
    Measurement,
    Run,
    compare,
    gain_but_one,
    judge,
    paired_ratios,
    pairs_against,
    promising,
)


@pytest.mark.parametrize(
    ("ratios", "verdict"),
    [
        ((1.5, 1.4, 1.6), "faster"),
        ((1.5, 0.9, 1.6), "same"),  # one pair disagrees: noise, not a gain
        ((1.01, 1.02, 1.01), "same"),  # every pair agrees, but below the minimum gain
        ((0.5, 0.6, 0.55), "slower"),
        ((0.99, 0.98, 0.99), "same"),
        ((2.0,), "same"),  # one pair never decides
        ((), "same"),
    ],
)
def test_judge_needs_every_pair_and_a_minimum_gain(ratios, verdict):
    assert judge(ratios) == verdict


def _m(name: str, rates: list[float]) -> Measurement:
    # 1 s runs: examples/s equals the examples counted
    return Measurement(name, [Run(1.0, 10, int(r)) for r in rates])


def test_compare_pairs_repeat_by_repeat_so_a_shared_slow_moment_cancels():
    # The machine slowed down in repeat 2 for both variants: unpaired medians would blur
    # it, the pairs still all say B is twice as fast.
    a = _m("a", [1000, 300, 1000])
    b = _m("b", [2000, 600, 2000])
    c = compare(a, b)
    assert c.ratios == (2.0, 2.0, 2.0)
    assert (c.ratio, c.low, c.high, c.verdict) == (2.0, 2.0, 2.0, "faster")
    assert compare(b, a).verdict == "slower"


def test_paired_ratios_skip_runs_that_measured_nothing():
    a = Measurement("a", [Run(1.0, 1, 100), Run(0.0, 0, 0), Run(1.0, 1, 100)])
    b = Measurement("b", [Run(1.0, 1, 150), Run(1.0, 1, 150)])
    assert paired_ratios(a, b) == (1.5,)


def test_a_second_look_takes_all_but_one_pair_from_five():
    def c(*ratios: float) -> Comparison:
        return Comparison(ratios, judge(ratios))

    assert pairs_against(c(0.9, 1.0, 1.2)) == 2  # a tie is no gain
    assert promising(c(0.9, 1.2, 1.3), 0.05) and not promising(c(0.9, 0.95, 1.3), 0.05)
    assert not promising(c(1.1, 1.2, 1.3), 0.05)  # already faster: nothing to confirm
    assert not promising(c(0.9, 1.02, 1.3), 0.05)  # median below the gain
    assert gain_but_one(c(0.9, 1.2, 1.3, 1.25, 1.1), 0.1)
    assert not gain_but_one(c(0.9, 1.2, 1.3), 0.1)  # too few pairs
    assert not gain_but_one(c(0.9, 0.95, 1.3, 1.25, 1.2), 0.1)  # two against
