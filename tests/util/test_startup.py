"""util/startup.py: TensorFlow imported without JAX (tf.lite imports it when installed), and
JAX importable as usual afterwards; a process whose Keras backend is JAX keeps it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

# Whether JAX is installed, without importing it: this file's tests import it in their own
# processes, and an import here would cost every xdist worker ~0.5 s of CPU at collection.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")

CODE = (
    "import sys\n"
    "from tfperf.util.startup import lean_tensorflow_import\n"
    "with lean_tensorflow_import():\n"
    "    import tensorflow\n"
    "print('jax' in sys.modules)\n"
    "import jax\n"
    "print(jax.numpy.add(1, 2))\n"
)


def run(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_tensorflow_imports_without_jax_and_jax_imports_after():
    env = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    assert run(env) == ["False", "3"]


def test_a_jax_keras_backend_keeps_tensorflows_jax_import():
    assert run({**os.environ, "KERAS_BACKEND": "jax"}) == ["True", "3"]
