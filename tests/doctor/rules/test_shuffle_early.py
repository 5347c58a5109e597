"""The rule for a shuffle buffer of decoded examples (rules/shuffle_early.py): with bytes per
element as the diagnosis measured them before the shuffle and before the decode, a buffer
that the move would shrink by 32 MiB or more, to a quarter or less, is RAM advice; a risk when
the buffer as written outgrows the budget. Small savings, or a random map in between, get
nothing."""

from __future__ import annotations

import tensorflow as tf

from tfperf.doctor.rules import REWRITES
from tfperf.doctor.rules.shuffle_early import SHUFFLE_EARLY, rule_shuffle_after_decode


def decode(i):
    return tf.cast(tf.fill([8], i), tf.float32), i % 2


def _files_then_decode() -> tf.data.Dataset:
    return tf.data.Dataset.range(10_000).map(decode).shuffle(1000).batch(8)


def _bytes(ev_maker, ds, late: int, early: int, **fields):
    graph = ev_maker(ds).graph
    at = next(s.index for s in graph.stages if s.kind == "shuffle")
    return ev_maker(ds, shuffle_bytes={at: late}, shuffle_early_bytes={at: early}, **fields)


def test_a_buffer_of_decoded_examples_is_ram_advice_and_a_risk_over_the_budget(evidence):
    ds = _files_then_decode()
    (f,) = rule_shuffle_after_decode(_bytes(evidence, ds, 150_000, 40, budget=2**30))
    assert f.code == "shuffle_after_decode" and f.kind == "input" and f.expected_speedup is None
    assert "1,000 elements of ~150,000 B after map#1 (sequential) (143.1 MiB)" in f.evidence
    assert "before map#1 (sequential) each would be ~40 B (39.1 KiB)" in f.evidence
    assert "move the shuffle before map#1" in f.change and "143.0 MiB less RAM" in f.expected
    (risk,) = rule_shuffle_after_decode(_bytes(evidence, ds, 150_000, 40, budget=2**20))
    assert risk.kind == "risk" and "over the RAM budget of 1.0 MiB" in risk.evidence
    assert REWRITES[SHUFFLE_EARLY.label] == SHUFFLE_EARLY  # --fix's candidate


def test_small_savings_or_a_random_map_between_get_nothing(evidence):
    ds = _files_then_decode()
    assert rule_shuffle_after_decode(_bytes(evidence, ds, 20_000, 40)) == []  # ~19 MiB
    assert rule_shuffle_after_decode(_bytes(evidence, ds, 150_000, 60_000)) == []  # 2.5x
    assert rule_shuffle_after_decode(evidence(ds)) == []  # nothing measured

    def augment(x, y):
        return x + tf.random.uniform([]), y

    random = tf.data.Dataset.range(10_000).map(decode).map(augment).shuffle(1000)
    assert rule_shuffle_after_decode(evidence(random)) == []
