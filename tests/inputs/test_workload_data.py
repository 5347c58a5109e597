"""inputs/workload_data.py: a workload's data written as splits train and eval (from another
seed), with its offline step, plus raw splits when its original pipeline reads raw rows, the
same bytes for the same seed; the offline step sent to convert's workers as a factory they
rebuild when the workload is a built-in one; and `convert --workload X --resume` keeping
finished splits (their shards are not rewritten)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tfperf.data.convert.options import load_preprocess
from tfperf.data.schema import Feature, Schema
from tfperf.inputs.workload_data import (
    offline_preprocess_ref,
    workload_offline_step,
    write_workload_data,
)
from tfperf.workloads import get_workload
from tfperf.workloads.base import Workload

from helpers.convertkit import read_back


def _scale(row: dict) -> dict:
    return {"x": row["x"] * 10, "y": row["y"]}


class TinyWorkload(Workload):
    name = "tiny"
    original_needs_raw = True

    def raw_schema(self) -> Schema:
        return Schema.of(
            Feature(name="x", dtype="float32", shape=(2,)), Feature(name="y", dtype="int64")
        )

    def schema(self) -> Schema:
        return Schema.of(
            Feature(name="x", dtype="float32", shape=(2,), storage="bytes"),
            Feature(name="y", dtype="int64"),
        )

    def generate(self, n: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        for i in range(n):
            yield {"x": rng.random(2, dtype=np.float32), "y": i}

    def offline_preprocess(self):
        return _scale


def test_write_workload_data_splits_and_schemas(tmp_path):
    wl = TinyWorkload()
    m = write_workload_data(
        wl, tmp_path / "d", examples=20, eval_examples=6, seed=3, progress=False, workers=1
    )
    assert {k: v.records for k, v in m.splits.items()} == {
        "train": 20,
        "eval": 6,
        "train_raw": 20,
        "eval_raw": 6,
    }
    assert m.workload == "tiny" and m.schema == wl.schema()
    assert m.split_schema("train_raw") == wl.raw_schema() and m.split_schema("eval") == wl.schema()
    raw = [r["x"] for r in wl.generate(20, 3)]
    tuned = read_back(tmp_path / "d", "train")
    np.testing.assert_allclose(np.stack([r["x"] for r in tuned]), np.stack(raw) * 10)
    raw_back = read_back(tmp_path / "d", "train_raw")
    np.testing.assert_array_equal(np.stack([r["x"] for r in raw_back]), np.stack(raw))
    evals = np.stack([r["x"] for r in read_back(tmp_path / "d", "eval_raw")])
    assert not np.isin(evals, np.stack(raw)).any()  # eval rows are not training rows
    again = write_workload_data(
        wl, tmp_path / "d2", examples=20, eval_examples=6, seed=3, progress=False, workers=1
    )
    assert again.splits == m.splits  # deterministic: same bytes, same sha256


def test_offline_preprocess_ref_rebuilds_built_in_workloads_only():
    wl = get_workload("distance_maps", image_size=16, max_clicks=2)
    ref = offline_preprocess_ref(wl)
    assert (ref.factory, ref.kwargs) == (
        "tfperf.inputs.workload_data:workload_offline_step",
        {"name": "distance_maps", "options": wl.options},
    )
    row = next(wl.generate(1, seed=4))
    rebuilt = load_preprocess(ref)(row)  # what a worker process computes
    np.testing.assert_array_equal(rebuilt["dist"], wl.offline_preprocess()(row)["dist"])
    assert offline_preprocess_ref(TinyWorkload()) is _scale  # not built in: the function
    assert offline_preprocess_ref(get_workload("chess")) is None  # no offline step
    assert callable(workload_offline_step("distance_maps", wl.options))


def test_no_examples_at_all_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="examples and eval_examples are both 0"):
        write_workload_data(TinyWorkload(), tmp_path, examples=0, eval_examples=0, progress=False)


def _shards(out) -> dict[str, tuple[int, int]]:
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(out.iterdir())
        if ".tfrecord-" in p.name
    }


def test_workload_resume_keeps_finished_shards(tmp_path, cli):
    out = tmp_path / "chess"
    args = ["convert", "--workload", "chess", "--examples", "300", "--eval-examples", "60"]
    args += ["--shard-size", "8KiB", "--workers", "1", "--out", out, "--quiet"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    before = _shards(out)
    assert len(before) > 2
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    assert _shards(out) == before  # not one shard rewritten
    # A half-written split: its finished shards stay, the rest is written.
    victim = sorted(p for p in out.iterdir() if "-train.tfrecord-" in p.name)[-1]
    victim.unlink()
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    kept = {k: v for k, v in _shards(out).items() if "-eval" in k}
    assert kept == {k: v for k, v in before.items() if "-eval" in k}
    assert os.path.exists(victim)
