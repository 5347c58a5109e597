"""`train.jit_compile`: whether tfperf's loop compiles each replica's train step with XLA.
`auto` resolves as Keras 3's `compile(jit_compile="auto")` does
(`Trainer._resolve_auto_jit_compile`): on where an accelerator is present and the model's
layers all support XLA, off on CPU-only hosts and under tf.distribute's mirrored and
multi-worker strategies. Pure: the devices and the strategy are arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import keras

JitSetting = bool | Literal["auto"]

# tfperf's strategies that Keras' fit would run without a tf.distribute strategy.
SINGLE_DEVICE = frozenset({"one_device", "default"})


@dataclass(frozen=True)
class JitChoice:
    """On or off, and why (the run summary and --json say both)."""

    enabled: bool
    reason: str


def unsupported_layers(model: keras.Model) -> list[str]:
    """Names of the model's layers that say they cannot run under XLA (Keras' supports_jit)."""
    layers = model._flatten_layers() if hasattr(model, "_flatten_layers") else []
    return [layer.name for layer in layers if not getattr(layer, "supports_jit", True)]


def resolve_jit_compile(
    setting: JitSetting,
    model: keras.Model,
    strategy_kind: str,
    accelerators: Sequence[str],
    *,
    printing: bool = False,
) -> JitChoice:
    """`accelerators`: the host's non-CPU device types (e.g. ["GPU", "GPU"]);
    `printing`: train.print_tensors is set (tf.print cannot run inside XLA)."""
    if setting is True:
        if printing:
            return JitChoice(
                False,
                "train.jit_compile: true, but off: train.print_tensors "
                "prints inside the step, which XLA cannot compile",
            )
        return JitChoice(True, "train.jit_compile: true")
    if setting is False:
        return JitChoice(False, "train.jit_compile: false")
    if not accelerators:
        return JitChoice(False, "auto: off on a CPU-only host (as Keras' compile)")
    if strategy_kind not in SINGLE_DEVICE:
        return JitChoice(
            False,
            f"auto: off under the {strategy_kind} strategy (as Keras' compile under tf.distribute)",
        )
    if printing:
        return JitChoice(False, "auto: off: train.print_tensors prints inside the step")
    refused = unsupported_layers(model)
    if refused:
        return JitChoice(False, f"auto: off: layer {refused[0]} does not support XLA")
    from tensorflow.python.framework.config import is_op_determinism_enabled

    if is_op_determinism_enabled():
        return JitChoice(False, "auto: off: op determinism is enabled (as Keras' compile)")
    return JitChoice(True, f"auto: on ({accelerators[0]} present, every layer supports XLA)")


def host_accelerators() -> list[str]:
    """This host's non-CPU physical device types."""
    import tensorflow as tf

    return [d.device_type for d in tf.config.list_physical_devices() if d.device_type != "CPU"]


# Words of TensorFlow's errors when XLA cannot compile a function (an op without an XLA
# kernel, a shape it cannot make static).
_XLA_WORDS = ("XLA", "compile graph", "jit_compile", "Detected unsupported operations")


def is_xla_refusal(exc: BaseException) -> bool:
    return any(w in str(exc) for w in _XLA_WORDS)


def xla_message(exc: BaseException) -> str:
    """The first line of TensorFlow's message that says what XLA refused."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    hit = next((ln for ln in lines if any(w in ln for w in _XLA_WORDS)), lines[0] if lines else "")
    return hit[:300]
