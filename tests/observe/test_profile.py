"""`tfperf profile` on a real training run: an .xplane.pb where TensorBoard looks, and a
timeline.json whose traceEvents hold the profiled steps (through xprof and without it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfperf.observe.trace import (
    ProfileError,
    latest_xplane,
    parse_steps,
    xprof_available,
    xspace_to_trace_events,
)


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
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")  # PYTHONPATH has tests/: conftest.py
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfperf.cli.main",
            "profile",
            "run.yaml",
            "--steps",
            "3:5",
            "--out",
            "prof",
            "--json",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    return root / "prof", json.loads(res.stdout)


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
    found = step_events(trace, range(3, 6))
    assert all(found[s] for s in range(3, 6)), {s: len(v) for s, v in found.items()}
    # unprofiled steps are absent; the spans have real durations
    assert not step_events(trace, range(1, 3))[1]
    assert all(ev["dur"] > 0 for evs in found.values() for ev in evs)


def test_fallback_converter_reads_the_xspace_proto(profiled):
    out, data = profiled
    trace = xspace_to_trace_events(Path(data["xplane"]).read_bytes())
    found = step_events(trace, range(3, 6))
    assert all(len(found[s]) == 1 for s in range(3, 6))
    ops = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] != found[3][0]["tid"]]
    assert ops, "expected op events on the compute threads"
    starts = [found[s][0]["ts"] for s in range(3, 6)]
    assert starts == sorted(starts)


def test_parse_steps():
    assert parse_steps("20:25") == (20, 25)
    assert parse_steps("7") == (7, 7)
    for bad in ("a:b", "5:3", "0:2"):
        with pytest.raises(ProfileError):
            parse_steps(bad)
