"""hooks.py: the loop's one HookList calls every hook in order at each point of a run, every
hook cleans up at the end even when one before it fails (the first error is raised after),
a hook stops the run through RunState.stop_reason, and the base Hook does nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfperf.config import config_from_dict
from tfperf.errors import UserError
from tfperf.hooks import Hook, HookList, NonFiniteLossError, RunState


class Recorder(Hook):
    def __init__(self, name: str, calls: list[tuple[str, ...]], fail_at_end: bool = False):
        self.name, self.calls, self.fail_at_end = name, calls, fail_at_end

    def on_train_begin(self, run):
        self.calls.append((self.name, "begin"))

    def on_loop_begin(self, run, step):
        self.calls.append((self.name, "loop", str(step)))

    def on_loop_end(self, run, step, logs):
        self.calls.append((self.name, "loop end", str(step), str(logs["loss"])))
        if step >= 2:
            run.stop_reason = "enough"

    def on_train_end(self, run, logs):
        self.calls.append((self.name, "end"))
        if self.fail_at_end:
            raise RuntimeError(f"{self.name} failed")


def _run(tmp_path: Path) -> RunState:
    cfg = config_from_dict({})
    return RunState(cfg, None, None, None, step=0, out_dir=tmp_path, train_writer=None,
                    examples_per_step=32)  # fmt: skip


def test_every_hook_is_called_in_order_and_a_hook_can_stop_the_run(tmp_path):
    calls: list[tuple[str, ...]] = []
    hooks = HookList([Recorder("a", calls), Hook(), Recorder("b", calls)])
    run = _run(tmp_path)
    hooks.on_train_begin(run)
    while run.stop_reason is None:
        hooks.on_loop_begin(run, run.step)
        run.step += 1
        hooks.on_loop_end(run, run.step, {"loss": 0.5})
    hooks.on_train_end(run, {})
    assert run.step == 2 and run.stop_reason == "enough"
    assert [c for c in calls if c[0] == "a"] == [
        ("a", "begin"),
        ("a", "loop", "0"),
        ("a", "loop end", "1", "0.5"),
        ("a", "loop", "1"),
        ("a", "loop end", "2", "0.5"),
        ("a", "end"),
    ]
    assert [c[1] for c in calls[:2]] == ["begin", "begin"]  # a before b at each point
    assert [c[0] for c in calls[:2]] == ["a", "b"]


def test_every_hook_cleans_up_and_the_first_error_is_raised(tmp_path):
    calls: list[tuple[str, ...]] = []
    hooks = HookList(
        [Recorder("a", calls, fail_at_end=True), Recorder("b", calls, fail_at_end=True),
         Recorder("c", calls)]
    )  # fmt: skip
    with pytest.raises(RuntimeError, match="a failed"):
        hooks.on_train_end(_run(tmp_path), {})
    assert calls == [("a", "end"), ("b", "end"), ("c", "end")]


def test_run_state_defaults_and_the_loss_error():
    run = _run(Path("out"))
    assert (run.is_chief, run.precision, run.stop_reason, run.checkpoint_dir) == (
        True,
        "float32",
        None,
        None,
    )
    assert run.cfg.pipeline.batch_size > 0
    assert issubclass(NonFiniteLossError, UserError)
    HookList().on_train_end(run, {})  # no hooks: nothing to do
