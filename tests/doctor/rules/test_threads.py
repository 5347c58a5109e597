"""The input-threads rule (rules/threads.py): training with the input on its own pool of half
the cores (pipeline.threads), timed beside training as it is in paired repeats; faster in
every pair is a compute finding and a run-file key (which gives any pipeline its own pool),
straddling 1 is nothing."""

from __future__ import annotations

from types import SimpleNamespace

import tensorflow as tf

from tfperf.config import config_from_dict
from tfperf.doctor.evidence.evidence import PAIRED_TRAINING
from tfperf.doctor.fix.runfile import run_file_candidates
from tfperf.doctor.rules import run_rules
from tfperf.doctor.rules.threads import THREADS_VARIANT, threads_variant
from tfperf.inputs.datasets import make_input_dataset
from tfperf.measure import Measurement, Run, compare


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8).prefetch(2)


def _measured(name: str, rates: list[float]) -> Measurement:
    return Measurement(name, [Run(1.0, 1, int(r)) for r in rates])


def test_input_threads_beyond_the_noise_is_a_finding_and_a_run_file_key(evidence, tmp_path):
    ref = _measured(PAIRED_TRAINING, [1000, 1100, 1000])
    few = _measured(f"{THREADS_VARIANT}1", [1200, 1300, 1250])  # 1.18-1.25x in every pair
    paired = {f"{THREADS_VARIANT}1": compare(ref, few)}
    rates = {"pipeline": 3000.0, "compute": 1500.0, "training": 1000.0}
    variants = {f"{THREADS_VARIANT}1": 1250.0}
    ctx = evidence(_dataset(), **rates, variants=variants, paired=paired, cores=2)
    (f,) = [f for f in run_rules(ctx) if f.code == "input_threads"]
    assert f.kind == "compute" and "pipeline.threads: 1" in f.change
    assert "private_threadpool_size = 1" in f.change and "on 2 shared cores" in f.evidence
    diag = SimpleNamespace(findings=[f], batch_size=8, variants=variants)
    cfg = config_from_dict({"workload": "regression"})
    assert ("input threads", {"pipeline.threads": 1}) in run_file_candidates(cfg, diag)
    # straddling 1 in its pairs: nothing
    few = _measured(f"{THREADS_VARIANT}1", [1300, 1000, 1200])
    ctx = evidence(
        _dataset(), **rates, variants=variants, paired={f"{THREADS_VARIANT}1": compare(ref, few)}
    )
    assert not [f for f in run_rules(ctx) if f.code == "input_threads"]
    # the run file's key gives the pipeline its own pool, user pipelines included
    (tmp_path / "threads_pipe.py").write_text(
        "import tensorflow as tf\n\n"
        "def make(training, batch_size):\n"
        "    return tf.data.Dataset.range(8).map(lambda x: (x, x)).batch(batch_size)\n"
    )
    cfg = config_from_dict(
        {"data": {"pipeline": "threads_pipe:make"}, "pipeline": {"threads": 1, "batch_size": 4}}
    )
    cfg.source = str(tmp_path / "run.yaml")  # where data.pipeline's module is looked for
    ds = make_input_dataset(cfg, training=False)
    assert ds.options().threading.private_threadpool_size == 1
    assert [int(x[0]) for x, _ in ds] == [0, 4]


def test_the_what_if_names_its_thread_count():
    assert threads_variant({f"{THREADS_VARIANT}3": 100.0, "precision=float32": 1.0}) == (
        f"{THREADS_VARIANT}3",
        3,
    )
    assert threads_variant({"precision=float32": 1.0}) is None
