"""`tfperf profile` (cli/profile.py) on a real training run, in this process: an .xplane.pb
where TensorBoard looks, a timeline.json whose traceEvents hold the profiled steps, and the
--json report. observe/trace's own tests (tests/observe/test_trace.py) cover the conversion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfperf.observe.trace import latest_xplane, xprof_available

from helpers.trainkit import tfperf_here


def step_events(trace: dict, steps: range) -> dict[int, list[dict]]:
    """The per-step 'train' spans (args.step_num = N) for each N in `steps`."""
    found: dict[int, list[dict]] = {s: [] for s in steps}
    for ev in trace["traceEvents"]:
        num = ev.get("args", {}).get("step_num")
        if ev.get("ph") == "X" and ev.get("name", "").startswith("train") and num is not None:
            if int(num) in found:
                found[int(num)].append(ev)
    return found


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("profile")
    (root / "run.yaml").write_text(
        "data:\n  pipeline: helpers.slow_pipelines:clean\n"
        "model:\n  name: helpers.slow_pipelines:tiny_model\n  loss: mse\n"
        "pipeline:\n  batch_size: 32\ntrain:\n  monitor_system: false\n"
    )
    out = root / "prof"
    res = tfperf_here("profile", root / "run.yaml", "--steps", "3:5", "--out", out, "--json")
    return out, json.loads(res.stdout)


def test_profile_writes_xplane_where_tensorboard_reads_it(profiled):
    out, data = profiled
    xplane = Path(data["xplane"])
    assert xplane.exists() and xplane.suffixes[-2:] == [".xplane", ".pb"]
    assert xplane.parent.parent == out / "logs" / "plugins" / "profile"
    assert latest_xplane(out / "logs") == xplane
    assert data["steps"] == [3, 5]
    assert all(isinstance(k, str) for k in data["peak_memory"])


def test_timeline_holds_the_profiled_steps(profiled):
    out, data = profiled
    trace = json.loads((out / "timeline.json").read_text())
    assert data["converter"] == ("xprof" if xprof_available() else "xplane_pb2")
    assert data["events"] == len(trace["traceEvents"])
    found = step_events(trace, range(3, 6))
    assert all(found[s] for s in range(3, 6)), {s: len(v) for s, v in found.items()}
    # unprofiled steps are absent; the spans have real durations
    assert not step_events(trace, range(1, 3))[1]
    assert all(ev["dur"] > 0 for evs in found.values() for ev in evs)


def test_steps_that_are_not_a_range_exit_with_one_paragraph(tmp_path, cli):
    (tmp_path / "run.yaml").write_text("data:\n  pipeline: helpers.slow_pipelines:clean\n")
    res = cli("profile", tmp_path / "run.yaml", "--steps", "5:3", "--out", tmp_path / "p")
    assert res.exit_code == 2
    assert "--steps: expected 1 <= START <= STOP" in res.output and "Traceback" not in res.output
