"""Ragged and sparse tensors anywhere in a dataset (issues 30 and 32): `tfperf.diagnose`,
`tfperf.optimize`, `tfperf doctor` on a run file whose data.pipeline is the user's own
function, and `bench`, on real pipelines of variable-length tags (a RaggedTensor at the
source crashed all of them with "Cannot convert a Tensor of dtype variant to a NumPy
array"). Each part's own checks are in the tests of its module (graph/test_lint.py,
probes/test_bounded.py, measure/test_probes.py, measure/test_examples.py)."""

from __future__ import annotations

from pathlib import Path

import tfperf
from tfperf.testing import assert_same_examples

from helpers import ragged_pipelines as rp

# The smallest measurements the doctor takes (two repeats: the fewest compare can judge).
FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


def test_diagnose_and_optimize_a_ragged_source_pipeline():
    ds = rp.ragged_source()
    diag = tfperf.diagnose(ds, None, overrides=FAST)
    assert diag.pipeline.examples_per_s.median > 0
    # Every stage is timed (the ragged source and shuffle included), none is an error.
    assert [s.error for s in diag.stages] == [None] * len(diag.stages)
    assert {s.kind for s in diag.stages} >= {"source", "shuffle", "map", "batch"}
    out, report = tfperf.optimize(ds, None, budget_s=20, overrides=FAST)
    assert report.diagnosis is not None
    assert out.element_spec == ds.element_spec
    assert_same_examples(ds, out)


def test_a_sparse_feature_is_diagnosed_and_its_rows_counted():
    ds = rp.sparse_features()
    diag = tfperf.diagnose(ds, None, overrides=FAST)
    assert diag.batch_size == 32
    # Rows, not stored values (2 per row): 32 a batch, 24 in the last of each pass.
    assert 24 <= diag.pipeline.examples_per_batch <= 32
    assert [s.error for s in diag.stages] == [None] * len(diag.stages)


def _run_file(tmp_path: Path, pipeline: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"data:\n  pipeline: helpers.ragged_pipelines:{pipeline}\n"
        "model:\n  name: helpers.ragged_pipelines:bag_model\n  loss: mse\n"
        "pipeline:\n  batch_size: 32\n"
        "doctor: {steps: 4, warmup: 2, repeats: 2, min_seconds: 0.05}\n"
        f"train:\n  out_dir: {tmp_path / 'out'}\n"
    )
    return path


def test_doctor_and_bench_on_a_run_file_with_a_ragged_source(tmp_path, cli):
    from tfperf.bench import bench_pipeline
    from tfperf.config import load_config

    path = _run_file(tmp_path, "padded_tags")
    res = cli("doctor", path)
    assert res.exit_code == 0, res.output
    assert "stage prefixes" in res.stdout and "Traceback" not in res.output
    stages = res.stdout.split("stage prefixes")[1].split("findings")[0]
    assert "source#0" in stages and "shuffle#1" in stages and "batch#" in stages
    rep = bench_pipeline(load_config(path), repeats=1, batches=3, warmup=1)
    assert rep.tuned.examples_per_s.median > 0


def test_optimize_a_padded_batch_of_ragged_tags_keeps_the_examples_but_their_padding():
    """The cache after the decode applies the padded_batch again (a plain batch could not
    stack the tags); the shuffled source pads each example to another batch's longest, so
    the examples match without their padding."""
    ds = rp.padded_tags()
    out, report = tfperf.optimize(ds, None, budget_s=20, overrides=FAST)
    reasons = [t.reason for t in report.fix.trials]
    assert not any("Error" in r for r in reasons), reasons
    assert out.element_spec == ds.element_spec
    assert_same_examples(ds, out)
