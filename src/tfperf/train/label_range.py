"""Class indices against the model's output units: a sparse loss or metric on labels
0..K-1 needs K outputs. Checked on the first real batch before training, and read back
from TensorFlow's own error when a later batch holds a larger label (the CPU kernel raises
it; on a GPU the loss silently becomes NaN instead)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

# The CPU kernel's message (SparseSoftmaxCrossEntropyWithLogits).
_KERNEL_MESSAGE = re.compile(
    r"Received a label value of (-?\d+) which is outside the valid range of \[0, (\d+)\)"
)


def label_span(labels: Any) -> tuple[int, int] | None:
    """(smallest, largest) class index in a batch of integer-valued labels; None when they
    are not numbers or not whole."""
    values = np.asarray(labels)
    if values.size == 0 or not np.issubdtype(values.dtype, np.number):
        return None
    if not np.all(np.mod(values, 1) == 0):
        return None
    return int(values.min()), int(values.max())


def out_of_range(span: tuple[int, int], units: int) -> bool:
    return span[0] < 0 or span[1] >= units


def explain(
    where: str, name: str, span: tuple[int, int], units: int, seen: str, model: str, data: str
) -> str:
    """The paragraph: the labels' range, the output units, and the two ways to agree."""
    lo, hi = span
    classes = hi + 1
    held = f"label {lo}" if lo == hi else f"labels {lo}..{hi}"
    if lo < 0:
        fix = f"class indices start at 0: shift the labels in {data}"
    else:
        fix = (
            f"give the model's last layer {classes} units (one per class) in {model}, or, if "
            f"there are {units} classes, make the labels 0..{units - 1} in {data}"
        )
    return (
        f"{where}: '{name}' takes class indices, and {seen} holds {held} "
        f"(so at least {classes} classes), but the model's last layer has {units} units (classes "
        f"0..{units - 1}): {fix}"
    )


def from_kernel_error(exc: BaseException) -> tuple[int, int] | None:
    """(label, units) from TensorFlow's out-of-range label error, None for other errors."""
    found = _KERNEL_MESSAGE.search(str(exc))
    return (int(found.group(1)), int(found.group(2))) if found else None
