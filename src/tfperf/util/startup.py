"""Importing TensorFlow faster: with Python's cyclic garbage collector paused, and what the
import made frozen afterwards."""

from __future__ import annotations

import gc
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
