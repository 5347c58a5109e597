"""Scalars of a TensorBoard log folder (tfperf's logs/train or logs/eval) as plain lists of
(step, value) per tag, read with TensorBoard's own EventAccumulator: TF2's tf.summary.scalar
writes tensors (the 'scalars' plugin), older writers simple_value; both are read."""

from __future__ import annotations

import math
from pathlib import Path

Series = list[tuple[int, float]]


def has_events(log_dir: Path) -> bool:
    """The folder holds at least one TensorBoard event file."""
    return log_dir.is_dir() and any(log_dir.glob("events.out.tfevents.*"))


def read_scalars(log_dir: Path) -> dict[str, Series]:
    """{tag: [(step, value), ...]} sorted by step, the last value kept where a resumed run
    wrote a step twice; non-finite values are left out. An empty dict when the folder holds
    no event file."""
    if not has_events(log_dir):
        return {}
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    # 0: keep every event of these kinds; histograms, images and graphs are not read.
    sizes = {ea.TENSORS: 0, ea.SCALARS: 0, ea.HISTOGRAMS: 1, ea.IMAGES: 1, ea.AUDIO: 1}
    acc = ea.EventAccumulator(str(log_dir), size_guidance=sizes)
    acc.Reload()
    out: dict[str, dict[int, float]] = {}
    try:
        tensor_tags = list(acc.PluginTagToContent("scalars"))
    except KeyError:  # no tensor scalar at all: a file of simple_value scalars only
        tensor_tags = []
    for tag in tensor_tags:
        for event in acc.Tensors(tag):
            value = tensor_util.make_ndarray(event.tensor_proto)
            if value.size == 1:
                out.setdefault(tag, {})[int(event.step)] = float(value.reshape(()))
    for tag in acc.Tags().get(ea.SCALARS, []):
        for scalar in acc.Scalars(tag):
            out.setdefault(tag, {})[int(scalar.step)] = float(scalar.value)
    return {
        tag: sorted((s, v) for s, v in by_step.items() if math.isfinite(v))
        for tag, by_step in out.items()
    }
