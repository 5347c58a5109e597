"""The doctor and bench with pipeline.service on, against a real tf.data service (the
session's: a dispatcher and 2 workers, separate processes on 127.0.0.1): the doctor times
the rate this process receives and says it cannot time the remote stages one by one (no
crash); bench times its stage prefixes here and the whole pipeline through the service."""

from __future__ import annotations

import pytest

from tfperf.bench import bench_pipeline
from tfperf.config import load_config
from tfperf.doctor.diagnosis.diagnose import SERVICE_NOTE, diagnose

from helpers import trainkit

FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


@pytest.mark.slow  # a service of three processes
def test_doctor_and_bench_read_from_the_service(tmp_path, shared_data_service):
    data = trainkit.write_data(tmp_path / "data", n=256, shards=8)
    rf = trainkit.write_runfile(tmp_path, data)
    address = shared_data_service
    service = [f"pipeline.service.address={address}", "pipeline.service.mode=distributed_epoch"]
    cfg = load_config(rf, [*service, *FAST, "doctor.what_ifs=[]"])
    diag = diagnose(cfg, compute_variants=False)
    assert SERVICE_NOTE in diag.notes and diag.stages == []
    assert diag.pipeline.examples_per_s.median > 0 and diag.training.examples_per_s.median > 0
    rep = bench_pipeline(cfg, repeats=1, batches=3, warmup=1)
    assert [m.stage for m in rep.stages][0] == "read" and rep.stages[-1] is rep.tuned
    assert all(m.examples_per_s.median > 0 for m in rep.stages)
