"""`tfperf inspect` (cli/inspect.py) in this process: the splits, the schema and an example
(float32 values as float32), --json, an unknown split named, and the reports on stdout,
unwrapped when piped. --verify's checks: tests/data/test_verify.py."""

from __future__ import annotations

import json

import numpy as np

from tfperf.data.convert.run import convert

from helpers.convertkit import small_dataset


def test_inspect_shows_splits_schema_and_an_example(tmp_path, cli):
    root, m = small_dataset(tmp_path)
    res = cli("inspect", root)
    assert res.exit_code == 0, res.output
    text = res.stdout  # the report, on stdout
    assert m.splits["train"].shards[0].file in text and "40 records" in text
    assert "float32" in text and "[4]" in text
    res = cli("inspect", root, "--json")
    desc = json.loads(res.stdout)
    tr = desc["splits"]["train"]
    assert tr["records"] == 40 and len(tr["shards"]) == len(m.splits["train"].shards)
    assert tr["example"]["id"] == "int64 0" and tr["example"]["s"] == "b''"
    assert [f["name"] for f in tr["schema"]] == ["id", "v", "s"]
    res = cli("inspect", root, "--split", "nope")
    assert res.exit_code == 2 and "no split 'nope'" in res.stderr


def test_reports_go_to_stdout_unwrapped_when_piped(tmp_path, cli, monkeypatch):
    # The command line in this process: its stdout and stderr are captured, not a terminal.
    monkeypatch.setenv("COLUMNS", "80")
    deep = tmp_path / ("a folder with a rather long name " * 2).strip() / ("deeper_" * 8)
    root, _ = small_dataset(deep)
    np.savez(deep / "d.npz", x=np.arange(5))
    res = cli("inspect", root, "--verify")
    assert res.exit_code == 0, res.stderr
    assert any(str(root) in line for line in res.stdout.splitlines()), res.stdout
    assert "40 records" in res.stdout and "verified" in res.stdout
    assert "records" not in res.stderr
    res = cli("convert", deep / "d.npz", "--out", deep / "c")
    assert res.exit_code == 0, res.stderr
    assert any(f"{deep / 'c'}: split train: 5 records" in ln for ln in res.stdout.splitlines())


def test_float32_values_print_as_float32(tmp_path, cli):
    rows = [{"v": np.float32(0.1), "w": np.array([0.1, 1 / 3], np.float32)}]
    convert(rows, tmp_path / "o", progress=False)
    res = cli("inspect", tmp_path / "o", "--json")
    example = json.loads(res.stdout)["splits"]["train"]["example"]
    assert example["v"] == "float32 0.1", example
    assert example["w"] == "float32[2] [0.1, 0.33333334]", example
