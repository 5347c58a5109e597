"""`tfperf export-tfds DIR` (cli/export_tfds.py) in this process: TFDS's two files written
beside an already converted folder's shards and named on stdout, a split renamed for TFDS
said, and a folder without manifest.json refused. What TFDS then loads:
tests/data/test_tfds_export.py."""

from __future__ import annotations

import json

import numpy as np

from tfperf.data.convert.run import convert


def test_the_metadata_is_written_beside_the_shards_and_named(tmp_path, cli):
    out = tmp_path / "o"
    rows = [{"id": np.int64(i), "x": np.float32(i / 2)} for i in range(6)]
    convert(rows, out, name="plain", progress=False)
    convert(rows[:2], out, name="plain", split="dev.small", progress=False)
    assert not (out / "dataset_info.json").exists()
    res = cli("export-tfds", out)
    assert res.exit_code == 0, res.output
    assert f"{out / 'dataset_info.json'} and {out / 'features.json'}" in res.stdout
    assert "TFDS calls split 'dev.small' 'dev_small'" in res.stdout
    info = json.loads((out / "dataset_info.json").read_text())
    splits = {s["name"]: s for s in info["splits"]}
    assert set(splits) == {"train", "dev_small"}
    assert json.loads((out / "features.json").read_text())  # the features, as TFDS reads them


def test_a_folder_without_a_manifest_is_refused(tmp_path, cli):
    res = cli("export-tfds", tmp_path / "nothing-here")
    assert res.exit_code == 2 and "manifest.json" in res.stderr and "Traceback" not in res.output
