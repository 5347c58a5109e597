"""observe/trace in this process: ProfileHook profiles exactly the chosen steps of a loop
of real tf.function calls, write_timeline turns the newest .xplane.pb into trace events (the
XSpace proto read without xprof too), and --steps is parsed and checked."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import tensorflow as tf

from tfperf.observe.trace import (
    ProfileError,
    ProfileHook,
    latest_xplane,
    parse_steps,
    write_timeline,
    xspace_to_trace_events,
)


def _steps_in(trace: dict) -> list[int]:
    """The step numbers of the 'train' spans, in time order."""
    spans = [
        ev
        for ev in trace["traceEvents"]
        if ev.get("ph") == "X"
        and ev.get("name", "").startswith("train")
        and "step_num" in ev.get("args", {})
    ]
    return [int(ev["args"]["step_num"]) for ev in sorted(spans, key=lambda e: e["ts"])]


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> Path:
    """Logs of a loop of 5 one-step calls whose steps 2..3 were profiled."""
    logdir = tmp_path_factory.mktemp("trace") / "logs"
    run = SimpleNamespace(step=0, out_dir=logdir.parent, log_dir=logdir)
    hook = ProfileHook(2, 3)
    x = tf.Variable(tf.ones([8, 8]))

    @tf.function
    def step():
        x.assign(tf.tanh(x @ x))

    hook.on_train_begin(run)
    for done in range(5):
        hook.on_loop_begin(run, done)
        step()
        hook.on_loop_end(run, done + 1, {})
    hook.on_train_end(run, {})
    assert hook.done and hook.profiled_steps == [2, 3]
    return logdir


def test_only_the_chosen_steps_are_in_the_timeline(profiled, tmp_path):
    result = write_timeline(profiled, tmp_path / "timeline.json")
    assert result.xplane == latest_xplane(profiled)
    assert result.xplane.parent.parent == profiled / "plugins" / "profile"
    trace = json.loads(result.timeline.read_text())
    assert result.events == len(trace["traceEvents"]) > 0
    assert _steps_in(trace) == [2, 3]


def test_the_xspace_proto_is_read_without_xprof(profiled):
    trace = xspace_to_trace_events(latest_xplane(profiled).read_bytes())
    assert _steps_in(trace) == [2, 3]
    names = {ev["args"]["name"] for ev in trace["traceEvents"] if ev["name"] == "process_name"}
    assert any("/host:CPU" in n for n in names), names
    spans = [ev for ev in trace["traceEvents"] if ev["ph"] == "X"]
    assert all(ev["dur"] >= 0 for ev in spans) and any(ev["dur"] > 0 for ev in spans)


def test_a_folder_without_a_profile_is_an_error(tmp_path):
    assert latest_xplane(tmp_path) is None
    with pytest.raises(ProfileError, match="no .xplane.pb"):
        write_timeline(tmp_path, tmp_path / "timeline.json")


def test_steps_already_passed_are_refused(tmp_path):
    run = SimpleNamespace(step=5, out_dir=tmp_path, log_dir=None)
    with pytest.raises(ProfileError, match="already at step 5"):
        ProfileHook(3, 5).on_train_begin(run)


def test_parse_steps():
    assert parse_steps("20:25") == (20, 25)
    assert parse_steps("7") == (7, 7)
    for bad in ("a:b", "5:3", "0:2"):
        with pytest.raises(ProfileError):
            parse_steps(bad)
