"""Fixtures of the doctor's tests: `evidence`, what the rules read, built on a real dataset's
graph with neutral rates that each test overrides; `slow_map_evidence`, the same for an
input-bound run whose map takes most of the time; `record_files`, four small TFRecord
files; `tfperf_data`, shards and manifest.json as `tfperf convert` lays them out.

The tests mirror the package: tests/doctor/<subpackage>/test_<module>.py tests
src/tfperf/doctor/<subpackage>/<module>.py (these fixtures apply to every folder below);
the end-to-end runs of `tfperf doctor` stay here."""

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
            "cache_budget": 2**20,
            "shuffle_bytes": {},
            "cache_candidate": None,
            "nondeterministic_rate": None,
        }
        return Evidence(graph=lint.read_graph(ds), **{**neutral, **fields})

    return make


@pytest.fixture
def slow_map_evidence(evidence):
    """slow_map_evidence(ds, **fields): input-bound on 2 cores, `ds`'s first map taking 90%
    of the pipeline's time (100 ex/s; the model alone 1,000 ex/s), unless `fields` say
    otherwise."""
    from tfperf.doctor.evidence.findings import StageTiming
    from tfperf.doctor.graph import lint

    def make(ds: Any, **fields: Any) -> Any:
        st = next(s for s in lint.read_graph(ds).stages if s.kind.startswith("map"))
        timing = StageTiming(st.index, st.label, st.kind, 100.0, 9000.0)
        slow = {"pipeline": 100.0, "compute": 1000.0, "training": 100.0, "stages": [timing]}
        return evidence(ds, **{**slow, "input_bound_fraction": 0.8, "cores": 2, **fields})

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


@pytest.fixture
def tfperf_data():
    """write(root, n=512, shards=4) -> root: `n` examples (x: float32[DIM], y: float32[1]) of
    helpers.slow_pipelines in `shards` shards plus manifest.json, as `tfperf convert` lays
    them out (the same shards for the train and eval splits)."""
    from pathlib import Path

    import tensorflow as tf

    from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
    from tfperf.data.schema import Feature, Schema

    from helpers import slow_pipelines as sp

    def write(root: Path, n: int = 512, shards: int = 4) -> Path:
        schema = Schema.of(
            Feature(name="x", dtype="float32", shape=(sp.DIM,)),
            Feature(name="y", dtype="float32", shape=(1,)),
        )
        x, y = sp.arrays(n)
        root.mkdir(parents=True, exist_ok=True)
        per = n // shards
        infos = []
        for s in range(shards):
            name = f"train.tfrecord-{s:05d}-of-{shards:05d}"
            with tf.io.TFRecordWriter(str(root / name)) as w:
                for i in range(s * per, (s + 1) * per):
                    w.write(schema.encode({"x": x[i], "y": y[i]}))
            size = (root / name).stat().st_size
            infos.append(ShardInfo(file=name, records=per, bytes=size, sha256="0" * 64))
        split = SplitInfo(shards=infos, records=per * shards)
        splits = {"train": split, "eval": split}
        save_manifest(Manifest(name="t", schema=schema, splits=splits), root)
        return root

    return write
