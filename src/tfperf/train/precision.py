"""Numeric precision: which Keras dtype policies this machine can run, setting one before
a model is built, and choosing the fastest by measurement (`precision: auto`).

Nothing here guesses speed from the hardware's name: on a CPU with AVX512_BF16 bfloat16 is
~2x faster than float32 and float16 4-8x slower, elsewhere it differs, so `auto` times each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Keras is imported on first use, where a policy is set
    import keras

POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclass(frozen=True)
class PrecisionTrial:
    """One policy's measurement: seconds per step after warm-up, and the last loss."""

    policy: str
    step_seconds: float
    loss: float
    error: str | None = None

    @property
    def usable(self) -> bool:
        return self.error is None and math.isfinite(self.loss) and math.isfinite(self.step_seconds)


@dataclass(frozen=True)
class PrecisionChoice:
    policy: str
    trials: list[PrecisionTrial] = field(default_factory=list)
    measured: bool = False

    def describe(self) -> str:
        if not self.measured:
            return f"precision {self.policy} (from the run file)"
        parts = []
        for t in self.trials:
            if t.usable:
                parts.append(f"{t.policy} {t.step_seconds * 1e3:.1f} ms/step")
            else:
                parts.append(f"{t.policy} unusable ({t.error or f'loss {t.loss}'})")
        return f"precision auto -> {self.policy} (measured: {', '.join(parts)})"


def supported_policies() -> list[str]:
    """Policies the visible hardware can run: all on CPU, by compute capability on GPU."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        # CPUs run every policy (bfloat16/float16 may be emulated: measurement decides).
        return list(POLICIES)
    out = ["float32"]
    caps = []
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        caps.append(details.get("compute_capability", (0, 0)))
    low = min(caps)
    if low >= (8, 0):
        out.append("mixed_bfloat16")  # bfloat16 tensor cores from Ampere on
    if low >= (7, 0):
        out.append("mixed_float16")  # float16 tensor cores from Volta on
    return out


def set_policy(policy: str) -> None:
    """Sets Keras' global dtype policy; models built afterwards use it."""
    import keras

    keras.config.set_dtype_policy(policy)


def needs_loss_scaling(policy: str) -> bool:
    """float16 gradients underflow without loss scaling; bfloat16 has float32's range."""
    return policy == "mixed_float16"


def wrap_optimizer(optimizer: keras.Optimizer, policy: str) -> keras.Optimizer:
    """Wraps the optimizer in Keras 3's LossScaleOptimizer for float16."""
    import keras

    if needs_loss_scaling(policy) and not isinstance(
        optimizer, keras.optimizers.LossScaleOptimizer
    ):
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def choose_precision(
    candidates: Sequence[str], run_trial: Callable[[str], PrecisionTrial]
) -> PrecisionChoice:
    """Measures each candidate with `run_trial` and keeps the fastest with a finite loss."""
    trials = []
    for policy in candidates:
        try:
            trials.append(run_trial(policy))
        except Exception as exc:  # noqa: BLE001 - a policy that fails is simply not chosen
            trials.append(
                PrecisionTrial(policy, math.inf, math.nan, error=f"{type(exc).__name__}: {exc}")
            )
    usable = [t for t in trials if t.usable]
    if not usable:
        # float32 is the reference: if even it diverges, training reports the NaN itself.
        return PrecisionChoice("float32", trials, measured=True)
    best = min(usable, key=lambda t: t.step_seconds)
    return PrecisionChoice(best.policy, trials, measured=True)
