"""The rule registry (rules/registry.py): every rule registered once where it is defined, and
what is derived from it agrees with what --fix offers: each candidate a rule's change is
made by is that rule's `Rewrite` (so its trial predicts that rule's findings), and each
rewrite of a data.pipeline function has a code edit of its own."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.fix.candidates import PARALLEL_BATCH, dataset_candidates
from tfperf.doctor.fix.pipeline_file import code_edits
from tfperf.doctor.fix.runfile import run_file_candidates
from tfperf.doctor.graph import lint
from tfperf.doctor.rules import ORDER_CODES, PREDICTED_BY, PRIORITY, REWRITES, RULES

KINDS = {"risk", "data", "input", "compute", "resume"}


def test_each_rule_is_registered_once_with_a_kind_and_a_priority_of_its_own():
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes)) and set(PRIORITY) == set(codes)
    assert all(r.kind in KINDS for r in RULES)
    assert len({r.priority for r in RULES}) == len(RULES)  # ties never left to chance
    assert PRIORITY[:5] == (
        "shuffle_over_budget",
        "shuffle_after_decode",
        "cache_after_random",
        "shuffle_after_batch",
        "repeat_before_shuffle",
    )
    assert set(ORDER_CODES) >= {"shuffle_after_batch", "repeat_before_shuffle"}
    assert all(RULES[codes.index(c)].kind == "data" for c in ORDER_CODES)


def test_a_candidate_predicts_the_findings_of_the_rules_that_list_it():
    assert PREDICTED_BY["vectorize per-example maps"] == ("per_example_parse", "per_example_map")
    assert PREDICTED_BY["parallel maps (also py_function)"] == ("sequential_map",)
    assert PREDICTED_BY["XLA"] == ("xla",)
    for label, codes in PREDICTED_BY.items():
        for code in codes:
            assert label in [rw.label for rw in RULES[[r.code for r in RULES].index(code)].rewrites]


def _every_edit(record_files: list[str]) -> tf.data.Dataset:
    """Files read one after another, a sequential map, a cache after a random map, a shuffle,
    float64 outputs and a plain batch: every graph rewrite of --fix applies."""
    ds = tf.data.Dataset.from_tensor_slices(record_files).flat_map(tf.data.TFRecordDataset)
    ds = ds.map(tf.strings.length).map(lambda n: n + tf.random.uniform([], 0, 2, tf.int32))
    ds = ds.cache().shuffle(8).map(lambda n: tf.cast(n, tf.float64))
    return ds.batch(4)


def test_every_dataset_candidate_is_a_rules_rewrite_with_its_own_code_edit(record_files):
    ds = _every_edit(record_files)
    labels = [name for name, _ in dataset_candidates(lint.read_graph(ds), ds, None)]
    assert len(labels) == 14, labels
    # float64: computed in float32 from the source on first; the output cast for what is left.
    assert labels.index("float32 at the source") + 1 == labels.index("float32 outputs")
    assert set(labels) - set(REWRITES) == {PARALLEL_BATCH.label}
    generic = "apply it where the pipeline is built"
    for label, edit in zip(labels, code_edits(tfperf.config_from_dict({}), labels), strict=True):
        assert edit.startswith(f"{label}: ") and generic not in edit, edit


def test_every_run_file_candidate_of_a_rule_is_its_rewrite():
    cfg = tfperf.config_from_dict({"pipeline": {"parse": "per_example"}})
    found = [
        Finding(code, "", None, "", change, "", None, "compute")
        for code, change in [
            ("no_cache", ""),
            ("precision", "train.precision: mixed_float16 (or auto)"),
            ("xla", ""),
            ("small_batch", ""),
        ]
    ]
    diag = SimpleNamespace(findings=found, batch_size=32)
    labels = [name for name, _ in run_file_candidates(cfg, diag)]
    assert "batched parse" in labels and "XLA" in labels, labels
    assert [n for n in labels if n not in REWRITES] == []  # precision: only when allowed
    cfg.doctor.allow = ["precision"]
    labels = [name for name, _ in run_file_candidates(cfg, diag)]
    assert [n for n in labels if n not in REWRITES] == ["precision mixed_float16"]


def _finding(code: str, gain: float | None) -> Finding:
    return Finding(code, code, "map#1", "", "", "", gain, "input", 1)


def test_gains_within_the_noise_tie_and_priority_ranks_them():
    from tfperf.doctor.rules.registry import TIE, _ties_by_priority

    pri = {"per_example_map": 80, "sequential_map": 100, "no_interleave": 90}

    def rank(*found: Finding) -> list[str]:
        ordered = sorted(found, key=lambda f: -(f.expected_speedup or 0.0))
        out = _ties_by_priority(ordered, lambda f: (), lambda f: pri[f.code])
        return [f.code for f in out]

    # The same two findings with their gains swapped by noise: one order either way.
    assert rank(_finding("sequential_map", 2.1), _finding("per_example_map", 1.9)) == [
        "per_example_map",
        "sequential_map",
    ]
    assert rank(_finding("sequential_map", 1.9), _finding("per_example_map", 2.1)) == [
        "per_example_map",
        "sequential_map",
    ]
    # A gain clearly larger than the noise still leads, whatever its priority.
    clear = rank(_finding("sequential_map", 2.0 * TIE), _finding("per_example_map", 1.5))
    assert clear == ["sequential_map", "per_example_map"]


def test_a_tie_between_findings_is_said():
    from tfperf.doctor.rules.registry import _tied_runs, _timed_tie, tie_statement

    pri = {"per_example_map": 80, "sequential_map": 100, "no_interleave": 90}
    found = [
        _finding("sequential_map", 2.1),
        _finding("per_example_map", 1.9),
        _finding("no_interleave", 1.2),  # beyond TIE of 1.9: not tied
    ]
    runs = _tied_runs(found, lambda f: (), lambda f: pri[f.code])
    assert [[f.code for f in run] for run in runs] == [
        ["per_example_map", "sequential_map"],
        ["no_interleave"],
    ]
    assert [_timed_tie(run) for run in runs] == [True, False]
    assert tie_statement(runs[0]) == (
        "per_example_map and sequential_map tie: expected ~1.90x and ~2.10x are within the "
        "noise (1.25x of each other); ranked by the rules' priority"
    )
    # A tie is the findings within TIE of the largest gain, not a chain of neighbours:
    # 1.7 is within 1.25x of 2.0 and 1.45 of 1.7, but 2.0 / 1.45 = 1.38 is beyond it.
    chain = [_finding("sequential_map", 2.0), _finding("per_example_map", 1.7)]
    chain.append(_finding("no_interleave", 1.45))
    runs = _tied_runs(chain, lambda f: (), lambda f: pri[f.code])
    assert [[f.code for f in run] for run in runs] == [
        ["per_example_map", "sequential_map"],
        ["no_interleave"],
    ]
    # Findings without a speed gain (RAM risks) are not a tie worth a statement.
    assert not _timed_tie([_finding("a", None), _finding("b", None)])


def _slow_map(slow_map_evidence, batch_variant: float | None = None, **fields):
    """slow_map_evidence on a per-example map (its cost 8,000-9,500 us per round), the
    model's step off the host's cores (the slower side sets the pace), and (`batch_variant`)
    the compute limit at 4x the batch timed at that rate."""
    from dataclasses import replace

    ds = tf.data.Dataset.range(64).map(lambda x: tf.math.sin(tf.cast(x, tf.float32))).batch(8)
    variants = {} if batch_variant is None else {"compute at batch=32": batch_variant}
    ctx = slow_map_evidence(ds, variants=variants, accelerator=True, **fields)
    ctx.stages = [replace(st, us_low=8000.0, us_high=9500.0) for st in ctx.stages]
    return ctx


def test_input_and_compute_findings_rank_together_by_expected_gain(slow_map_evidence):
    from tfperf.doctor.rules import run_rules

    # The pipeline (100 ex/s) sets the pace: its per-example map leads, the model's larger
    # batch (compute 1,000 -> 2,000 ex/s) gains nothing while the input limits.
    codes = [f.code for f in run_rules(_slow_map(slow_map_evidence, 2000.0))]
    assert codes.index("per_example_map") < codes.index("small_batch"), codes
    # The model sets the pace (a pipeline of 10,000 ex/s, ten times the compute limit, its
    # map 9% of its time): the larger batch leads, whatever training's wait read.
    fast = _slow_map(
        slow_map_evidence, 2000.0, pipeline=10_000.0, training=1000.0, input_bound_fraction=0.12
    )
    found = run_rules(fast)
    assert found[0].code == "small_batch", [(f.code, f.expected_speedup) for f in found]


def test_a_gain_has_the_range_of_the_rates_repeats_and_overlapping_ranges_tie(slow_map_evidence):
    from tfperf.doctor.rules.registry import ranked_with_ties, tie_statement

    quiet = _slow_map(slow_map_evidence, 1600.0, pipeline=900.0, training=800.0)
    found = {f.code: f for f in ranked_with_ties(quiet)[0]}
    assert found["small_batch"].expected_range is None  # one repeat: no range
    # The pipeline alone between 600 and 1,200 ex/s, the compute limit 900-1,100: at one end
    # the input limits (the map's removal worth the most), at the other the model does.
    noisy = _slow_map(slow_map_evidence, 1600.0, pipeline=900.0, training=800.0)
    noisy.pipeline_range, noisy.compute_range = (600.0, 1200.0), (900.0, 1100.0)
    ranked, ties = ranked_with_ties(noisy)
    by_code = {f.code: f for f in ranked}
    low, high = by_code["per_example_map"].expected_range
    gain = by_code["per_example_map"].expected_speedup
    assert low <= gain <= high and high > 1.3 * low, (low, gain, high)
    # Said to the tenth the gain is said in, rounded outward: the printed range holds it.
    said = f"({math.floor(low * 10) / 10:.1f}-{math.ceil(high * 10) / 10:.1f}x at the ends"
    assert said in by_code["per_example_map"].expected
    # The larger batch's what-if ran in the compute limit's rounds: it scales with it at
    # both ends (and the run's noise further, 1.0 here), so its range is the cost model's.
    assert by_code["small_batch"].expected_range is not None
    # The map's range overlaps the missing prefetch's (1.0-1.125x, a larger point): a tie,
    # said with the ranges, ranked by priority (the map first). The larger batch changes the
    # results: after them, in no tie with them, whatever its range.
    tied = next(run for run in ties if {"per_example_map", "no_prefetch"} <= {f.code for f in run})
    assert by_code["no_prefetch"].expected_speedup > gain
    assert tied.index(by_code["per_example_map"]) < tied.index(by_code["no_prefetch"])
    assert all("small_batch" not in {f.code for f in run} for run in ties)
    assert ranked.index(by_code["no_prefetch"]) < ranked.index(by_code["small_batch"])
    said = tie_statement(tied, 1.25)
    span = f"({math.floor(low * 10) / 10:.1f}-{math.ceil(high * 10) / 10:.1f}x)"
    assert span in said and "ranges that overlap" in said, said


def test_the_tie_factor_follows_the_runs_noise_within_its_bounds(evidence):
    from tfperf.doctor.rules.registry import BUSY_TIE, MAX_TIE, TIE, tie_factor

    ds = tf.data.Dataset.range(8).batch(4)
    assert tie_factor(evidence(ds)) == TIE  # one repeat, or a quiet host
    assert tie_factor(evidence(ds, spread=1.6)) == 1.6
    assert tie_factor(evidence(ds, spread=5.0)) == MAX_TIE
    # a busy host: its gains move further between runs than one run's spread shows
    assert tie_factor(evidence(ds, busy_host=True)) == BUSY_TIE
    assert tie_factor(evidence(ds, busy_host=True, spread=1.8)) == 1.8


def test_gains_within_a_noisy_runs_spread_tie():
    from tfperf.doctor.rules.registry import _tied_runs, tie_statement

    pri = {"per_example_map": 80, "sequential_map": 100}
    found = [_finding("sequential_map", 2.0), _finding("per_example_map", 1.4)]
    quiet = _tied_runs(found, lambda f: (), lambda f: pri[f.code])
    noisy = _tied_runs(found, lambda f: (), lambda f: pri[f.code], 1.6)
    assert [len(run) for run in quiet] == [1, 1]
    assert [[f.code for f in run] for run in noisy] == [["per_example_map", "sequential_map"]]
    assert "within the noise (1.6x of each other)" in tie_statement(noisy[0], 1.6)


def test_a_paired_what_if_of_the_model_spans_its_paired_ratios(slow_map_evidence):
    from tfperf.doctor.evidence.evidence import XLA_VARIANT
    from tfperf.doctor.rules.registry import ranked_with_ties
    from tfperf.measure.compare import Comparison

    # The model sets the pace (pipeline 10,000 ex/s, compute 1,000); XLA timed 1.2-1.8x
    # faster in three paired rounds (median 1.5x).
    ctx = _slow_map(
        slow_map_evidence, None, pipeline=10_000.0, training=1000.0, input_bound_fraction=0.0
    )
    ctx.variants = {XLA_VARIANT: 1500.0}
    ctx.paired = {XLA_VARIANT: Comparison((1.2, 1.5, 1.8), "faster")}
    ctx.pipeline_range, ctx.compute_range = (9000.0, 11_000.0), (950.0, 1050.0)
    xla = next(f for f in ranked_with_ties(ctx)[0] if f.code == "xla")
    assert xla.expected_speedup == pytest.approx(1.5)
    assert xla.expected_range == pytest.approx((1.2, 1.8))


def test_gain_ranges_tie_within_the_runs_noise_and_part_beyond_it():
    from tfperf.doctor.rules.registry import _tied_runs

    pri = {"per_example_parse": 70, "no_prefetch": 120}

    def ranged(code: str, gain: float, low: float, high: float) -> Finding:
        f = _finding(code, gain)
        f.expected_range = (low, high)
        return f

    def runs(*found: Finding) -> list[list[str]]:
        out = _tied_runs(list(found), lambda f: (), lambda f: pri[f.code], 1.25)
        return [[f.code for f in run] for run in out]

    # Ranges 1.31-1.63x and 1.00-1.29x: apart, but within the run's 1.25x noise: a tie, the
    # more specific cause first (medians 1.42x and 1.15x alone were beyond 1.25x of each other).
    close = (ranged("no_prefetch", 1.42, 1.31, 1.63), ranged("per_example_parse", 1.05, 1.0, 1.29))
    assert runs(*close) == [["per_example_parse", "no_prefetch"]]
    # 2.5-3.5x against 1.00-1.02x: apart beyond the noise, the larger gain leads.
    apart = (ranged("no_prefetch", 3.0, 2.5, 3.5), ranged("per_example_parse", 1.01, 1.0, 1.02))
    assert runs(*apart) == [["no_prefetch"], ["per_example_parse"]]
