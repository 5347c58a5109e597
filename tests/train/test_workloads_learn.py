"""Every built-in workload learns under tfperf's loop: on tiny generated data, the loss
of the last steps is below the loss of the first steps."""

from __future__ import annotations

import pytest

from tfperf.config import config_from_dict
from tfperf.hooks import Hook
from tfperf.inputs.datasets import ensure_workload_data
from tfperf.train.loop import train

# workload -> (batch size, steps, learning rate): small enough for 2 CPU cores.
SETTINGS = {
    "chess": (128, 80, 1e-3),
    "regression": (64, 60, 1e-3),
    "deblur": (8, 40, 1e-3),
    # 30 steps: the loss is already well down from ~0.53 to ~0.36 (60 proved no more).
    "distance_maps": (16, 30, 3e-3),
}
# Smaller images than the defaults: data generation, conversion and each step stay short.
OPTIONS = {
    "deblur": {"image_height": 48, "image_width": 64, "patch": 32, "filters": 16, "blocks": 1},
    "distance_maps": {"image_size": 32},
}


class LossLog(Hook):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_loop_end(self, run, step, logs):
        self.losses.append(float(logs["loss"]))


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_loss_decreases_on_each_workload(name, tmp_path):
    batch, steps, lr = SETTINGS[name]
    cfg = config_from_dict(
        {
            "workload": name,
            "workload_options": OPTIONS.get(name, {}),
            "data": {"dir": str(tmp_path / "data"), "examples": batch * 20, "eval_examples": batch},
            "pipeline": {"batch_size": batch, "shuffle_buffer": 256, "seed": 0},
            "model": {"learning_rate": lr},
            "train": {
                "out_dir": str(tmp_path / "run"),
                "max_steps": steps,
                "steps_per_loop": 5,
                "monitor_system": False,
                "checkpoint": {"every_steps": steps},
            },
        }
    )
    ensure_workload_data(cfg, progress=False)
    log = LossLog()
    result = train(cfg, hooks=[log], progress=False)
    assert result.steps == steps
    first, last = sum(log.losses[:2]) / 2, sum(log.losses[-2:]) / 2
    assert last < first, log.losses
