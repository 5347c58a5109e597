"""tf.data feeding a JAX training step: tfperf's doctor with your own jitted step as the
consumer. Run it: `python examples/jax_step.py` (needs `pip install jax`, the CPU build will
do). It prints the diagnosis (the pipeline is highly input-bound: a per-example map feeds a
small MLP), then what `tfperf.optimize` kept (the map vectorized, among others) and the
step's examples/s fed by the original and by the optimized pipeline, e.g.

    verdict: highly input-bound (input wait 9x% of training); ...
    training 12,000 -> 200,000 examples/s (15x); kept: vectorize per-example maps, ...

The step is a plain Flax-style function: parameters in, parameters out. The doctor calls a
callable that takes one batch (numpy, as `ds.as_numpy_iterator()` yields it), so the state
lives in a small closure (`Trainer` below).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf

import tfperf

FEATURES = 32


def make_dataset(examples: int = 8192, batch_size: int = 128) -> tf.data.Dataset:
    """A pipeline written the slow way: a per-example augmentation, then the batch."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(examples, FEATURES)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float32")

    def augment(features: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        for _ in range(20):  # one call per example: ~20 small ops each
            features = tf.tanh(features * 1.01 + 0.01)
        return features, label

    return tf.data.Dataset.from_tensor_slices((x, y)).map(augment).batch(batch_size)


def init_params(seed: int = 0, hidden: int = 64) -> dict[str, jax.Array]:
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    return {
        "w1": jax.random.normal(k1, (FEATURES, hidden)) * 0.1,
        "b1": jnp.zeros(hidden),
        "w2": jax.random.normal(k2, (hidden, 1)) * 0.1,
        "b2": jnp.zeros(1),
    }


def loss_fn(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = (h @ params["w2"] + params["b2"])[:, 0]
    return jnp.mean(jnp.logaddexp(0.0, logits) - y * logits)  # binary cross-entropy


@jax.jit
def train_step(
    params: dict[str, jax.Array], batch: tuple[jax.Array, jax.Array]
) -> tuple[dict[str, jax.Array], jax.Array]:
    x, y = batch
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), loss


class Trainer:
    """Your training loop's state around the jitted step: `trainer(batch)` is one step."""

    def __init__(self) -> None:
        self.params = init_params()

    def __call__(self, batch: tuple[np.ndarray, np.ndarray]) -> jax.Array:
        self.params, loss = train_step(self.params, batch)
        return loss  # the doctor waits for it (block_until_ready)


def examples_per_s(ds: tf.data.Dataset, step: Trainer, batches: int = 40) -> float:
    """Your own loop, timed: the step fed by `ds` as numpy."""
    it = ds.repeat().as_numpy_iterator()
    step(next(it)).block_until_ready()  # compiles
    start, examples = time.perf_counter(), 0
    for _ in range(batches):
        batch = next(it)
        step(batch).block_until_ready()
        examples += len(batch[1])
    return examples / (time.perf_counter() - start)


def main(budget_s: float = 60) -> None:
    ds = make_dataset()
    diag = tfperf.diagnose(ds, step=Trainer(), budget_s=budget_s / 3)
    print(diag.headline)
    fast, report = tfperf.optimize(ds, step=Trainer(), budget_s=budget_s)
    print(report)
    before, after = examples_per_s(ds, Trainer()), examples_per_s(fast, Trainer())
    print(f"your loop: {before:,.0f} -> {after:,.0f} examples/s (one run each)")


if __name__ == "__main__":
    main()
