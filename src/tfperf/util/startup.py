"""Importing TensorFlow faster: with Python's cyclic garbage collector paused, what the
import made frozen afterwards, and JAX left unimported."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_gc_passes() -> Iterator[None]:
    """Runs the body (an import of a large package) with the cyclic collector off, then
    freezes every object alive (gc.freeze).

    `import tensorflow` makes ~300,000 objects in ~2,800 modules; the collector's passes
    over them while they are made cost about a tenth of the import's CPU (0.3-0.4 s of
    3-4 s here, in every `tfperf` process). Frozen, they are skipped by every later full
    collection of a long run too. Nothing is freed late: module objects live as long as the
    process anyway."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        gc.freeze()


@contextmanager
def without_jax() -> Iterator[None]:
    """Runs the body (`import tensorflow`) with `import jax` failing, unless JAX is already
    imported or is Keras' backend: tf.lite imports jax whenever it is installed (~0.6 s of
    CPU in every process, for a converter tfperf never calls). Afterwards jax imports as
    usual."""
    wanted = "jax" in sys.modules or os.environ.get("KERAS_BACKEND") == "jax"
    if not wanted:
        sys.modules["jax"] = None  # type: ignore[assignment]  # the import system's "absent"
    try:
        yield
    finally:
        if not wanted and sys.modules.get("jax", 0) is None:
            del sys.modules["jax"]


@contextmanager
def lean_tensorflow_import() -> Iterator[None]:
    """Both of the above, around an import that brings TensorFlow in."""
    with without_gc_passes(), without_jax():
        yield
