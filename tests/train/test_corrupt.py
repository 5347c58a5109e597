"""Corrupt shards during training (train/corrupt.py): on_corrupt=error names the damaged
shard (exit 2, no traceback); on_corrupt=skip trains on and reports the records lost at each
epoch's end, once per finished epoch even when one call of the train function spans two,
none for the epoch a resumed run starts in. `tfperf` runs through its command line in this
process; the hook alone on the same corrupt shard."""

from __future__ import annotations

import json

from tfperf.config import load_config
from tfperf.train.corrupt import CorruptRecordsHook

from helpers import trainkit


def _corrupt(path, at: int = 60) -> None:
    # Flip one byte inside the first records' data: its CRC check fails there.
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def test_corrupt_shard_is_named_on_error(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    bad = data / "train.tfrecord-00001-of-00002"
    _corrupt(bad)
    rf = trainkit.write_runfile(tmp_path, data, max_steps=6)
    proc = trainkit.tfperf_here("train", str(rf), check=False)
    assert proc.returncode == 2, proc.stderr
    assert bad.name in proc.stderr and "corrupt" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_skip_trains_on_and_reports_each_epoch(tmp_path):
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    bad = data / "train.tfrecord-00001-of-00002"
    _corrupt(bad)
    rf = trainkit.write_runfile(tmp_path, data, epochs=2)
    proc = trainkit.tfperf_here(
        "train",
        str(rf),
        "--json",
        "--set",
        "pipeline.on_corrupt=skip",
        "--set",
        "pipeline.batch_size=8",
    )
    out = json.loads(proc.stdout)
    assert out["stopped_because"] == "epochs"
    # The flipped byte sits in shard 1's first record: all 32 of its records are lost.
    lines = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines() if "skipped" in ln]
    assert any("epoch 1: skipped 32 corrupt record" in ln for ln in lines), lines
    assert any("epoch 2: skipped 32 corrupt record" in ln for ln in lines), lines


def test_one_report_per_finished_epoch_even_when_a_call_spans_two(tmp_path, capsys):
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    _corrupt(data / "train.tfrecord-00001-of-00002")
    rf = trainkit.write_runfile(tmp_path, data)
    cfg = load_config(str(rf), ["pipeline.on_corrupt=skip"])
    run = trainkit.run_state(tmp_path, cfg=cfg, logs=True)
    hook = CorruptRecordsHook(cfg, steps_per_epoch=4)
    hook.on_train_begin(run)
    hook.on_loop_end(run, 3, {})  # within epoch 1
    assert hook.reports == []
    run.step = 9
    hook.on_loop_end(run, 9, {})  # epochs 1 and 2 ended in this call
    assert hook.reports == [(1, 32), (2, 32)] and run.corrupt_skipped_per_epoch == 32
    err = capsys.readouterr().err
    assert "epoch 1: skipped 32 corrupt record(s)" in err and "epoch 2: skipped 32" in err
    resumed = CorruptRecordsHook(cfg, steps_per_epoch=4)
    run.step = 10
    resumed.on_train_begin(run)  # in epoch 3: epochs 1 and 2 were reported before
    resumed.on_loop_end(run, 11, {})
    assert resumed.reports == []
