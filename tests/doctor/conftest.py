"""Fixtures of the doctor's tests: `evidence`, what the rules read, built on a real dataset's
graph with neutral rates that each test overrides; `slow_map_evidence`, the same for an
input-bound run whose map takes most of the time; `record_files`, four small TFRecord
files."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def evidence():
    """evidence(ds, **fields): the rules' Evidence for `ds`'s graph; every rate 1 ex/s, not
    input-bound, nothing measured per stage, a 1 MiB budget, unless `fields` say otherwise."""
    from tfperf.doctor.evidence.evidence import Evidence
    from tfperf.doctor.graph import lint

    def make(ds: Any, **fields: Any) -> Evidence:
        neutral: dict[str, Any] = {
            "pipeline": 1.0,
            "compute": 1.0,
            "training": 1.0,
            "input_bound_fraction": 0.0,
            "compute_batch": 1.0,
            "stages": [],
            "variants": {},
            "budget": 2**20,
            "shuffle_bytes": {},
            "cache_candidate": None,
            "nondeterministic_rate": None,
        }
        return Evidence(graph=lint.read_graph(ds), **{**neutral, **fields})

    return make


@pytest.fixture
def slow_map_evidence(evidence):
    """slow_map_evidence(ds, **fields): input-bound on 2 cores, `ds`'s first map taking 90%
    of the pipeline's time (100 ex/s; the model alone 1,000 ex/s)."""
    from tfperf.doctor.evidence.findings import StageTiming
    from tfperf.doctor.graph import lint

    def make(ds: Any, **fields: Any) -> Any:
        st = next(s for s in lint.read_graph(ds).stages if s.kind.startswith("map"))
        timing = StageTiming(st.index, st.label, st.kind, 100.0, 9000.0)
        rates = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0}
        return evidence(ds, **rates, input_bound_fraction=0.8, stages=[timing], cores=2, **fields)

    return make


@pytest.fixture
def record_files(tmp_path):
    """Four TFRecord files of 25 records each ('file<f>-record<i>'), in tmp_path."""
    import tensorflow as tf

    files = []
    for f in range(4):
        path = str(tmp_path / f"part-{f}.tfrecord")
        with tf.io.TFRecordWriter(path) as w:
            for i in range(25):
                w.write(f"file{f}-record{i}".encode())
        files.append(path)
    return files
