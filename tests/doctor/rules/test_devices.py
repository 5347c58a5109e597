"""The idle-accelerators rule (rules/devices.py): a host with several accelerators training on
one gets tf.distribute's mirrored strategy (the same global batch split over the devices),
its gain the compute limit scaled by the devices up to what the pipeline gives; a run on
every device, or a host without accelerators, gets none. --fix tries it as a run-file
change."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import tensorflow as tf

from tfperf.config import config_from_dict
from tfperf.doctor.fix.runfile import run_file_candidates
from tfperf.doctor.rules import run_rules
from tfperf.doctor.rules.devices import rule_idle_devices


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8).prefetch(2)


def test_idle_accelerators_are_named_with_the_scaling_the_pipeline_allows(evidence):
    rates = {"pipeline": 5000.0, "compute": 2000.0, "training": 1900.0}
    ctx = evidence(_dataset(), **rates, devices=4, devices_used=1)
    (f,) = [f for f in run_rules(ctx) if f.code == "idle_devices"]
    assert "4 accelerators" in f.evidence and "the pipeline then sets the pace" in f.evidence
    assert f.change.startswith("train.strategy: mirrored (the same global batch 8, 2 per device)")
    assert f.expected_speedup == pytest.approx(2.5)  # min(pipeline, 4 x compute) / compute
    assert not [
        f
        for f in run_rules(evidence(_dataset(), **rates, devices=4, devices_used=4))
        if f.code == "idle_devices"
    ]
    assert not [
        f for f in run_rules(evidence(_dataset(), **rates, devices=0)) if f.code == "idle_devices"
    ]
    cfg = config_from_dict({"workload": "regression"})
    cands = run_file_candidates(cfg, SimpleNamespace(findings=[f], batch_size=8))
    assert ("mirrored strategy", {"train.strategy": "mirrored"}) in cands


def test_the_devices_set_the_pace_when_the_pipeline_keeps_up(evidence):
    rates = {"pipeline": 50000.0, "compute": 2000.0, "training": 1900.0}
    (f,) = rule_idle_devices(evidence(_dataset(), **rates, devices=2, devices_used=1))
    assert f.kind == "compute" and "then sets the pace" not in f.evidence
    assert "this host has 2 accelerators and the run trains on 1" in f.evidence
    assert "(the same global batch 8, 4 per device)" in f.change
    assert f.expected_speedup == pytest.approx(2.0)  # 2 x compute, below the pipeline
