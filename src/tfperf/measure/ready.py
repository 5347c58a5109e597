"""Waiting for a step's results: frameworks that dispatch asynchronously (JAX, TensorFlow on
an accelerator) return before the work is done, so a timing or an idle gap must wait for
the results themselves."""

from __future__ import annotations

import sys
from typing import Any


def block(result: Any) -> None:
    """Waits until `result` is computed: JAX arrays (any pytree, when JAX is loaded) through
    `block_until_ready`, TensorFlow tensors by reading them; anything else is ready."""
    if "jax" in sys.modules:
        import jax

        jax.block_until_ready(result)
    import tensorflow as tf

    for leaf in tf.nest.flatten(result):
        if isinstance(leaf, tf.Tensor) and hasattr(leaf, "numpy"):
            leaf.numpy()  # an eager tensor on an accelerator is ready once it is read
        elif hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
