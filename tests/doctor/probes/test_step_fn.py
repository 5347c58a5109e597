"""A user's own training step as the doctor's consumer (step_fn.py): what the step is fed
(numpy, or the framework's arrays through `convert`), the input wait timed around the pull,
the compute limit on one batch held in memory, errors that name the step; and the whole
doctor on a Flax-style JAX step fed a planted per-example map (examples/jax_step.py)."""

from __future__ import annotations

import runpy
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

import tfperf
from tfperf.doctor.probes.step_fn import StepFn, to_numpy
from tfperf.errors import UserError
from tfperf.measure.ready import block

ROOT = Path(__file__).resolve().parents[3]
FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


def _jax() -> Any:
    """JAX, imported by the tests that use it: not at collection, in every xdist worker
    (~0.5 s of CPU each, the import that util/startup.py keeps out of TensorFlow's)."""
    import jax

    return jax


def xy(n: int = 64, batch: int = 8) -> tf.data.Dataset:
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    return tf.data.Dataset.from_tensor_slices((x, x[:, 0])).batch(batch)


def test_the_fed_runner_passes_numpy_batches_and_times_the_pull():
    seen: list[object] = []

    def slow(x: np.ndarray) -> np.ndarray:
        time.sleep(0.03)  # a sleep lasts at least this long, however busy the host
        return x

    ds = xy().map(lambda x, y: (tf.numpy_function(slow, [x], tf.float32), y))
    step = StepFn(lambda batch: seen.append(batch))
    wait = step.run_fed(iter(ds), 4)
    assert len(seen) == 4
    assert all(isinstance(a, np.ndarray) for b in seen for a in b), [type(a) for a in seen[0]]
    # four pulls of >= 30 ms each; at most one was ready ahead (tf.data's injected prefetch)
    assert wait >= 0.06, wait


def test_convert_turns_the_numpy_batch_into_the_steps_arrays():
    jax = _jax()
    seen: list[object] = []
    step = StepFn(lambda batch: seen.append(batch), convert=jax.device_put)
    step.run_fed(iter(xy()), 2)
    assert all(isinstance(a, jax.Array) for b in seen for a in b), [type(a) for a in seen[0]]


def test_the_compute_limit_feeds_one_batch_from_memory():
    seen: list[int] = []
    step = StepFn(lambda batch: seen.append(id(batch)))
    it = iter(xy())
    assert step.run_cached(it, 5) == 0.0  # no pull, no wait
    assert step.run_cached(it, 3) == 0.0
    assert len(seen) == 8 and len(set(seen)) == 1  # the same batch object every step
    # the iterator gave one batch: the next one is the second
    np.testing.assert_array_equal(next(it)[0].numpy()[0], np.arange(32, 36, dtype=np.float32))


def test_block_waits_for_a_jax_pytree_and_reads_tf_tensors():
    jax = _jax()
    result = {"loss": jax.numpy.ones(3) * 2, "tf": tf.constant(1.0), "other": "x"}
    block(result)  # nothing to assert but that every leaf kind is accepted
    assert to_numpy((tf.constant([1, 2]), {"a": tf.constant(3.0)}))[1]["a"] == 3.0


def test_a_step_that_raises_is_a_user_error_naming_it():
    def broken_step(batch: object) -> None:
        raise ValueError("shapes (8, 4) and (3, 1) not aligned")

    with pytest.raises(UserError, match=r"'.*broken_step' raised ValueError: shapes \(8, 4\)"):
        tfperf.diagnose(xy(), step=broken_step, overrides=FAST, budget_s=20)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step": 42}, "step: expected a callable that takes one batch"),
        ({"step": print, "convert": "jax"}, "convert: expected a callable"),
        ({"convert": np.asarray}, "convert applies to a step"),
        ({"step": print, "model": "m:f"}, "pass either model or step"),
    ],
)
def test_bad_step_arguments_are_named(kwargs, message):
    with pytest.raises(UserError, match=message):
        tfperf.diagnose(xy(), **kwargs)


@pytest.fixture(scope="module")
def example():
    """examples/jax_step.py's functions (its main() not run)."""
    return runpy.run_path(str(ROOT / "examples" / "jax_step.py"), run_name="example")


def test_a_jax_step_on_a_per_example_map_is_input_bound_and_optimize_vectorizes_it(
    example, tmp_path
):
    ds = example["make_dataset"](examples=4096)
    fast, report = tfperf.optimize(ds, step=example["Trainer"](), overrides=FAST, budget_s=60)
    diag = report.diagnosis  # the diagnosis optimize made first, as diagnose makes it
    assert diag.model.endswith("Trainer"), diag.model
    # ~20 ops per example against a tiny MLP step: far beyond a loaded host's noise, unless
    # the host's load swung between rounds, which the report then says instead of a verdict
    if not diag.inconsistent:
        assert diag.verdict == "highly input-bound", str(diag)
        assert diag.findings[0].code == "per_example_map", [f.code for f in diag.findings]
    assert "vectorize per-example maps" in report.kept, str(report)
    assert report.compile_kwargs == {}  # no Keras compile advice for a plain step
    # the twin gains ~10x here: asserted well below it
    assert report.speedup > 2, str(report)
    tfperf.testing.assert_same_examples(ds, fast)
    # the HTML report of a step's trials, as of a Keras model's
    page = report.to_html(tmp_path / "report.html").read_text()
    assert "vectorize per-example maps" in page and diag.model in page
    # the user's own loop, fed the optimized pipeline, trains on it
    trainer = example["Trainer"]()
    losses = [float(trainer(batch)) for batch in fast.take(3).as_numpy_iterator()]
    assert all(np.isfinite(losses)), losses
