"""What the Keras-on-other-backends tests run in a process of their own (Keras' backend is
fixed when keras is first imported): `python -m helpers.keras_backends` under
KERAS_BACKEND=jax fits with the InputMonitor on a slow and a fast pipeline, optimizes a
planted per-example map and a model compiled without XLA, printing one JSON object; the
test compares it with the same pipeline and model diagnosed under the TensorFlow backend
in its own process."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

BATCH = 32
FAST_FIT_EXAMPLES = 1024  # the fast fit's examples: 31 timed steps
# The smallest measurements the doctor takes (two repeats: the fewest compare can judge).
FAST = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.min_seconds=0.05"]


def arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.random((n, 16), dtype=np.float32)
    return x, (x.sum(axis=1) > 8).astype("float32")


def slow_dataset(sleep_s: float = 0.2, n: int = 256) -> Any:
    """Each batch waits `sleep_s` in Python: far slower than a tiny model's step."""
    import tensorflow as tf

    def wait(x: np.ndarray) -> np.ndarray:
        time.sleep(sleep_s)
        return x

    ds = tf.data.Dataset.from_tensor_slices(arrays(n)).batch(BATCH)
    ds = ds.map(lambda x, y: (tf.numpy_function(wait, [x], tf.float32), y))
    return ds.map(lambda x, y: (tf.ensure_shape(x, [None, 16]), y))


def fast_dataset(n: int = 8192) -> Any:
    """Batches from memory: the model sets the pace."""
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices(arrays(n)).batch(BATCH).cache()


def per_example_dataset(n: int = 4096) -> Any:
    """A planted flaw: ~30 small ops per example in a sequential per-example map."""
    import tensorflow as tf

    def heavy(x: Any, y: Any) -> Any:
        for _ in range(30):
            x = tf.math.sin(x) * 0.5 + 0.25
        return x, y

    return tf.data.Dataset.from_tensor_slices(arrays(n)).map(heavy).batch(64)


def small_model(width: int = 8, depth: int = 1) -> Any:
    import keras

    hidden = [keras.layers.Dense(width, activation="relu") for _ in range(depth)]
    model = keras.Sequential([keras.Input((16,)), *hidden, keras.layers.Dense(1)])
    # A stateful metric too: the doctor leaves the metrics out of the step it times.
    model.compile(
        "adam",
        keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy", keras.metrics.AUC(name="auc", from_logits=True)],
    )
    return model


def monitored_fit(
    ds: Any, model: Any, log_dir: str | None = None, epochs: int = 1
) -> dict[str, Any]:
    import tfperf.keras

    mon = tfperf.keras.InputMonitor(log_dir=log_dir, log_every=4, verbose=0)
    model.fit(mon.monitor(ds), epochs=epochs, verbose=0, callbacks=[mon])
    return mon.summary.to_dict()


def diagnosed() -> dict[str, Any]:
    import tfperf

    diag = tfperf.diagnose(per_example_dataset(), small_model(), overrides=FAST, budget_s=30)
    return {"verdict": diag.verdict, "findings": [f.code for f in diag.findings]}


def optimized() -> dict[str, Any]:
    """`tfperf.optimize` on the planted per-example map: its diagnosis, what it kept, and
    whether the returned pipeline yields the same examples."""
    import tfperf

    ds = per_example_dataset()
    fast, report = tfperf.optimize(ds, small_model(), overrides=FAST, budget_s=40)
    try:
        tfperf.testing.assert_same_examples(ds, fast)
        same = True
    except AssertionError:
        same = False
    diag = report.diagnosis
    return {
        "verdict": diag.verdict,
        "findings": [f.code for f in diag.findings],
        "kept": report.kept,
        "speedup": report.speedup,
        "same_examples": same,
    }


def jit_advice() -> dict[str, Any]:
    """A model compiled with jit_compile=False on a fast pipeline: the XLA what-if, timed
    with the model's own jitted step, and the compile advice it gives."""
    import tfperf
    from tfperf.doctor.fix.runfile import compile_kwargs

    model = small_model(64)
    model.compile("adam", "mse", jit_compile=False)
    # The whole budget for the diagnosis: op-by-op steps are slow on a busy host. The XLA
    # what-if, and the steps one this backend must leave untimed; not precision, batch or
    # threads (a third of the CPU), which the test does not look at.
    what_ifs = "doctor.what_ifs=[xla,steps]"
    diag = tfperf.diagnose(fast_dataset(2048), model, overrides=[*FAST, what_ifs], budget_s=60)
    return {
        "findings": [f.code for f in diag.findings],
        "verdict": diag.verdict,
        "notes": diag.notes,
        **compile_kwargs(diag, 4),
    }


def main(log_dir: str) -> None:
    import keras

    out = {
        "backend": keras.backend.backend(),
        "slow": monitored_fit(slow_dataset(), small_model(), log_dir, epochs=2),
        # Three 1024-wide layers: a step of ~15 ms (idle) against a dequeue of ~0.1 ms.
        "fast": monitored_fit(fast_dataset(FAST_FIT_EXAMPLES), small_model(1024, depth=3)),
        "doctor": optimized(),
        "advice": jit_advice(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    finally:
        # A numpy_function's tf.data thread may wait on the interpreter's lock at shutdown:
        # the process ends here, its output flushed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1 if sys.exc_info()[0] else 0)
