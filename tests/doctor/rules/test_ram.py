"""The RAM rule (rules/ram.py): a shuffle buffer the graph shows to be larger than the RAM
budget, sized with the plan the pipeline itself applies (bytes per buffered element as the
diagnosis measured them, plus the buffer's own overhead), is a "risk" finding ranked before
anything else, with the buffer that fits as its change; a buffer that fits, or one whose
elements were not measured, gets none. Nothing is filled: the rule reads the graph."""

from __future__ import annotations

import tensorflow as tf

from tfperf.data.pipeline import SHUFFLE_OVERHEAD_BYTES
from tfperf.doctor.rules import PRIORITY, REWRITES, run_rules
from tfperf.doctor.rules.ram import CAP_SHUFFLE, rule_shuffle_budget

PER = 4096  # bytes of one buffered element, as the diagnosis measures them (probes/bounded.py)


def _huge_shuffle() -> tf.data.Dataset:
    return tf.data.Dataset.range(10**6).shuffle(10_000_000).batch(8).prefetch(2)


def _shuffle_index(ds: tf.data.Dataset, evidence) -> int:
    return next(s.index for s in evidence(ds).graph.stages if s.kind == "shuffle")


def test_a_buffer_over_the_budget_is_a_risk_with_the_buffer_that_fits(evidence):
    ds = _huge_shuffle()
    at = _shuffle_index(ds, evidence)
    (f,) = rule_shuffle_budget(evidence(ds, shuffle_bytes={at: PER}, budget=2**20))
    fits = 2**20 // (PER + SHUFFLE_OVERHEAD_BYTES)  # 228 elements of 4,596 B in 1 MiB
    assert f.code == "shuffle_over_budget" and f.kind == "risk" and f.expected_speedup is None
    assert f.stage.startswith("shuffle#") and f.stage_index == at
    assert f"10,000,000 elements x {PER:,} B (+{SHUFFLE_OVERHEAD_BYTES} B each)" in f.evidence
    assert "budget 1.0 MiB" in f.evidence
    assert f"a buffer of at most {fits:,} elements" in f.change
    assert REWRITES[CAP_SHUFFLE.label] == CAP_SHUFFLE  # --fix's candidate: cap the buffer


def test_a_buffer_that_fits_or_was_not_measured_gets_nothing(evidence):
    ds = tf.data.Dataset.range(1000).shuffle(100).batch(8)
    at = _shuffle_index(ds, evidence)
    assert rule_shuffle_budget(evidence(ds, shuffle_bytes={at: PER}, budget=2**20)) == []
    huge = _huge_shuffle()
    assert rule_shuffle_budget(evidence(huge, budget=2**20)) == []  # no bytes measured
    # the buffer grows with the budget: 10M elements of 4 KiB fit in 64 GiB
    roomy = evidence(huge, shuffle_bytes={_shuffle_index(huge, evidence): PER}, budget=2**36)
    assert rule_shuffle_budget(roomy) == []


def test_the_ram_risk_is_ranked_first(evidence):
    ds = _huge_shuffle().unbatch().batch(8)  # no prefetch at the end: another finding
    at = _shuffle_index(ds, evidence)
    rates = {"pipeline": 10.0, "compute": 100.0, "training": 5.0, "input_bound_fraction": 0.5}
    codes = [f.code for f in run_rules(evidence(ds, **rates, shuffle_bytes={at: PER}))]
    assert codes[0] == "shuffle_over_budget" and "no_prefetch" in codes, codes
    assert PRIORITY[0] == "shuffle_over_budget"
