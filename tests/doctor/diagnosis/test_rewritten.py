"""The pipeline alone with --fix's first rewrites, timed by the diagnosis
(doctor/diagnosis/rewritten.py): per-example maps vectorized and every map made parallel,
where they change something; their rates and CPU times for the cost model; and the parallel
maps called slower only when every paired repeat says so (measure.compare), twice: a median
of a few short repeats on a busy host (CI's other test worker) once read 0.8x for a map that
runs 1.3-1.9x faster in parallel, and the doctor said nothing. Real pipelines timed for the
second look. How the rule reads the result: rules/test_parallel.py."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.config import config_from_dict
from tfperf.doctor.diagnosis.rewritten import (
    confirmed_slower,
    rewrite_probes,
    rewritten_costs,
    slower_rewrites,
)
from tfperf.doctor.evidence.evidence import PARALLEL, VECTORIZED
from tfperf.doctor.graph import lint
from tfperf.measure import Measurement, Run, pipeline_probe, side_by_side


def _timed(name: str, *rates: float) -> Measurement:
    """A measurement whose repeats ran at `rates` examples/s (one second each)."""
    return Measurement(name, [Run(seconds=1.0, batches=int(r), examples=int(r)) for r in rates])


def test_slower_means_every_paired_repeat():
    pipeline = _timed("pipeline", 100, 100, 100)
    noisy = _timed(PARALLEL, 60, 130, 70)  # median 0.7x, one pair faster
    slow = _timed(PARALLEL, 60, 70, 80)
    assert slower_rewrites(pipeline, {PARALLEL: noisy}, {}) == set()
    assert slower_rewrites(pipeline, {PARALLEL: slow}, {}) == {PARALLEL}
    assert slower_rewrites(pipeline, {PARALLEL: slow}, {PARALLEL: ValueError()}) == set()
    assert slower_rewrites(pipeline, {"other": slow}, {}) == set()


def _work(rounds: int):
    """Batches of 16 [64, 64] matrices, each multiplied by itself `rounds` times: at 4 rounds
    a batch is already well above a loaded host's ~1 ms wait per pulled batch (at [32, 32]
    that wait hid the 10x and one pair of repeats beside two CPU hogs read faster)."""
    ds = tf.data.Dataset.range(64).map(lambda i: tf.fill([64, 64], tf.cast(i, tf.float32)))

    def heavy(x):
        for _ in range(rounds):
            x = tf.matmul(x, x) / 64.0
        return x

    return ds.batch(16).map(heavy).repeat()


def test_a_second_look_keeps_only_what_is_slower_again():
    probes = [
        pipeline_probe("pipeline", _work(4), batches=8, warmup=2, min_seconds=0.1),
        # 40x the rounds, ~10x slower measured (at 10x the rounds, ~3x: one stalled repeat
        # of the pipeline in a full suite once made a pair read faster)
        pipeline_probe(PARALLEL, _work(160), batches=8, warmup=2, min_seconds=0.1),
    ]
    calls = []

    def measure(again):
        calls.append([p.name for p in again])
        return side_by_side(again, repeats=3)

    assert confirmed_slower({PARALLEL}, probes, {}, measure) == {PARALLEL}
    assert calls == [["pipeline", PARALLEL]]
    # Timed faster this time: the first look was the host's noise, the advice stays.
    probes[1] = pipeline_probe(PARALLEL, _work(1), batches=8, warmup=2, min_seconds=0.1)
    assert confirmed_slower({PARALLEL}, probes, {}, measure) == set()
    assert confirmed_slower(set(), probes, {}, measure) == set() and len(calls) == 2


def test_the_rewritten_pipelines_are_probed_where_they_change_something():
    d = config_from_dict({}).doctor
    ds = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32) * 2.0).batch(8)
    errors: dict[str, Exception] = {}
    probes = rewrite_probes(lint.read_graph(ds), ds, d, errors, limit=1.0)
    assert [p.name for p in probes] == [VECTORIZED, PARALLEL] and errors == {}
    # Nothing per example, no sequential map: nothing to time.
    plain = tf.data.Dataset.range(64).batch(8)
    assert rewrite_probes(lint.read_graph(plain), plain, d, errors, limit=1.0) == []


def test_the_cost_model_reads_the_timed_rates_and_cpu_of_the_rewrites():
    vectorized = Measurement(VECTORIZED, [Run(1.0, 10, 2000, cpu_seconds=0.5)])
    failed = Measurement(PARALLEL, [Run(1.0, 10, 1000, cpu_seconds=1.0)])
    costs = rewritten_costs({VECTORIZED: vectorized, PARALLEL: failed}, {PARALLEL: ValueError()})
    assert costs == {VECTORIZED: (2000.0, pytest.approx(250e-6))}
