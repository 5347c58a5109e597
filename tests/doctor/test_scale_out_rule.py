"""The doctor's scale-out rule: when input and model together need more CPU than the host
has (each alone is fast, together they crawl), it says so and estimates the tf.data service
workers needed from the per-worker rate and the compute limit, with the run-file change;
where the input fits beside the model it suggests no service. Rates as the doctor measures
them (examples/s), on a real dataset's graph."""

from __future__ import annotations

import math

import pytest


def _rates(pipeline: float, compute: float, training: float, waiting: float) -> dict:
    """The Evidence fields of these rates (examples/s; `waiting`: input-bound fraction)."""
    return {
        "pipeline": pipeline,
        "compute": compute,
        "training": training,
        "input_bound_fraction": waiting,
        "compute_batch": 8.0,
        "cores": 2,
    }


def _dataset():
    import tensorflow as tf

    ds = tf.data.Dataset.range(64).map(lambda x: x * 2, num_parallel_calls=2).batch(8)
    return ds.prefetch(2)


def test_input_and_model_fighting_for_the_cores_get_a_worker_estimate(evidence):
    from tfperf.doctor.rules import run_rules

    # Chess-like on 2 cores: 300 ex/s of input alone, 700 of model alone, 200 together.
    found = {
        f.code: f for f in run_rules(evidence(_dataset(), **_rates(300.0, 700.0, 200.0, 0.45)))
    }
    f = found["scale_out"]
    workers = math.ceil(700 / 300)
    assert "more CPU than this host has" in f.title and f.kind == "input"
    assert (
        f"it takes {workers} worker{'' if workers == 1 else 's'} to feed the compute limit"
        in f.evidence
    )
    assert "pipeline.service.address=grpc://" in f.change
    assert f"tfperf data-service local --workers {workers}" in f.change
    assert f.expected_speedup == pytest.approx(700 / 200)


@pytest.mark.parametrize(
    "rates",
    [
        (1500.0, 700.0, 690.0, 0.01),  # the input fits: training at the compute limit
        (1500.0, 700.0, 650.0, 0.04),  # barely waiting: the model is the limit
    ],
)
def test_no_service_where_the_input_fits_beside_the_model(rates, evidence):
    from tfperf.doctor.rules import run_rules

    assert "scale_out" not in {f.code for f in run_rules(evidence(_dataset(), **_rates(*rates)))}


def test_a_pipeline_slower_than_the_model_on_every_core_gets_a_worker_estimate(evidence):
    from tfperf.doctor.rules import run_rules

    # Input-bound, not by sharing the cores: the pipeline alone (300) is below the model (700).
    found = {
        f.code: f for f in run_rules(evidence(_dataset(), **_rates(300.0, 700.0, 290.0, 0.40)))
    }
    f = found["scale_out"]
    assert "cannot feed the model" in f.evidence
    assert "it takes 3 workers to feed the compute limit" in f.evidence
    assert f.expected_speedup == pytest.approx(700 / 290)


def test_the_service_comes_after_every_fix_of_this_hosts_pipeline(evidence):
    import tensorflow as tf

    from tfperf.doctor.graph import lint
    from tfperf.doctor.rules import run_rules

    # float64 batches (a fix on this host) while input and model share the cores.
    ev = evidence(_dataset(), **_rates(300.0, 700.0, 200.0, 0.45))
    wide = tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float64) * 0.5).batch(8)
    ev.graph = lint.read_graph(wide.prefetch(2))
    codes = [f.code for f in run_rules(ev) if f.kind != "risk"]
    assert "scale_out" in codes and codes[-1] == "scale_out", codes
    assert len(codes) > 1, codes  # another input finding, ranked before the service
