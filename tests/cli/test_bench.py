"""`tfperf bench RUNFILE --service ADDRESS` (cli/bench.py; the rest of the command and
bench.py: tests/test_bench.py) against a real tf.data service (the session's: a
dispatcher and two worker processes on 127.0.0.1), bench in this process: the full pipeline
is read through the service (the client-side rate), the per-worker rate is given, and the
stage prefixes still run here."""

from __future__ import annotations

import json

import pytest

from helpers import trainkit


@pytest.mark.slow  # three TensorFlow processes
def test_bench_measures_the_client_and_per_worker_rates(tmp_path, shared_data_service):
    data = trainkit.write_data(tmp_path / "data", n=256, shards=4)
    rf = trainkit.write_runfile(tmp_path, data)
    address = shared_data_service
    args = ("--repeats", "2", "--batches", "8", "--warmup", "2", "--json")
    proc = trainkit.tfperf_here("bench", str(rf), "--service", address, *args)
    report = json.loads(proc.stdout)
    svc = report["service"]
    assert svc["address"] == address and svc["mode"] == "parallel_epochs"
    assert svc["workers"] == 2 and svc["client_examples_per_s"] > 0
    assert svc["per_worker_examples_per_s"] == pytest.approx(svc["client_examples_per_s"] / 2)
    assert svc["local_examples_per_s"] > 0  # the prefixes ran here
    assert report["tuned"]["examples_per_s"]["median"] == svc["client_examples_per_s"]
