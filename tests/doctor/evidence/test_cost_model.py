"""The doctor's cost model (doctor/evidence/cost_model.py): training speed from the measured
rates and CPU time per example of pipeline and model, on shared cores or with an
accelerator."""

from __future__ import annotations

import pytest

from tfperf.doctor.evidence.cost_model import Costs


def costs(**kw: float) -> Costs:
    # A pipeline of 1000 ex/s on one core (1 ms of CPU each), a model of 2000 ex/s using
    # both cores (1 ms of CPU each), on 2 cores.
    base = {"pipeline": 1000.0, "pipeline_cpu": 1e-3, "compute": 2000.0, "compute_cpu": 1e-3}
    return Costs(**{**base, **kw}, cores=2)


def test_shared_cores_bound_training_below_the_slower_side():
    # alone 1000 ex/s each way, but together they need 2 ms of CPU per example on 2 cores
    assert costs().training() == pytest.approx(1000.0)
    assert costs(compute_cpu=2e-3).training() == pytest.approx(2 / 3e-3)


def test_a_parallel_map_is_faster_but_not_cheaper():
    c = costs()
    parallel = c.pipeline_changed(2000.0)  # the same work on two cores
    assert parallel.pipeline_cpu == c.pipeline_cpu
    # the model's CPU still competes: 2 cores / 2 ms per example = 1000 ex/s, no gain
    assert c.gain(parallel) == pytest.approx(1.0)
    # with the model on an accelerator the two overlap: twice as fast
    gpu = Costs(1000.0, 1e-3, 2000.0, 1e-3, cores=2, accelerator=True)
    assert gpu.gain(gpu.pipeline_changed(2000.0)) == pytest.approx(2.0)


def test_removing_cpu_work_gains_what_the_cores_allow():
    c = costs()
    cheaper = c.pipeline_changed(4000.0, cpu=0.25e-3)  # a batched parse: 4x less work
    # min(4000, 2000, 2 / 1.25 ms = 1600) = 1600 ex/s against 1000
    assert c.gain(cheaper) == pytest.approx(1.6)


def test_a_faster_model_uses_less_cpu_per_example():
    c = costs(pipeline=4000.0, pipeline_cpu=0.25e-3)
    faster = c.compute_changed(4000.0)
    assert faster.compute_cpu == pytest.approx(0.5e-3)
    assert c.gain(faster) == pytest.approx(min(4000.0, 2 / 0.75e-3) / 1600.0)


def test_unknown_cpu_times_fall_back_to_the_slower_side():
    assert Costs(500.0, 0.0, 800.0, 0.0, cores=2).training() == pytest.approx(500.0)
