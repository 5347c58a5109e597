"""data/convert/pool.py: worker processes write the same shards as one process, and a
preprocess function that cannot be sent to them (a closure) runs in this process; the task
is sent as the function, else the name or factory it can be rebuilt from."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from tfperf.data.convert.options import PreprocessFactory
from tfperf.data.convert.pool import sendable_task
from tfperf.data.convert.run import convert
from tfperf.data.convert.worker import ShardTask
from tfperf.data.schema import Feature, Schema

from helpers.convertkit import read_back, shard_bytes_of


def test_parallel_workers_write_the_same_shards(tmp_path):
    np.savez(
        tmp_path / "d.npz",
        x=np.random.default_rng(1).random((300, 8)).astype(np.float32),
        y=np.arange(300),
    )
    m1 = convert(tmp_path / "d.npz", tmp_path / "one", shard_bytes=4000, workers=1, progress=False)
    m2 = convert(tmp_path / "d.npz", tmp_path / "two", shard_bytes=4000, workers=2, progress=False)
    assert len(m1.splits["train"].shards) > 4
    assert m1.splits == m2.splits
    assert shard_bytes_of(tmp_path / "one") == shard_bytes_of(tmp_path / "two")


def test_unpicklable_preprocess_runs_in_this_process(tmp_path):
    offset = 5

    def closure(row: dict) -> dict:  # a local function cannot be sent to worker processes
        return {"v": row["v"] + offset}

    rows = [{"v": np.int64(i)} for i in range(30)]
    m = convert(
        rows, tmp_path / "o", preprocess=closure, shard_bytes=100, workers=2, progress=False
    )
    assert len(m.splits["train"].shards) > 1
    assert [r["v"].item() for r in read_back(tmp_path / "o")] == list(range(5, 35))


def test_the_task_is_sent_as_what_pickles():
    schema = Schema.of(Feature(name="v", dtype="int64"))
    task = ShardTask("o", "rows", None, schema, None, "", "error")

    def closure(row):
        return row

    factory = PreprocessFactory("json:loads", {}, "a factory")
    assert (
        sendable_task(dataclasses.replace(task, preprocess=json.dumps), json.dumps)[0] is not None
    )
    sent, why = sendable_task(dataclasses.replace(task, preprocess=closure), closure)
    assert sent is None and "closure" in why  # a local function has no name to import
    sent, _ = sendable_task(dataclasses.replace(task, preprocess=closure), factory)
    assert sent.preprocess is factory  # rebuilt by the workers instead
    sent, _ = sendable_task(dataclasses.replace(task, preprocess="m:f"), "m:f")
    assert sent.preprocess == "m:f"
