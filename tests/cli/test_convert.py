"""`tfperf convert` (cli/convert.py) in this process: --preprocess module:function with an
output --schema, --max-examples, --name, --split and --json, each option's bad value named,
--help, and built-in workload data (--workload) written by one or two worker processes. The
library's own tests are in tests/data/convert/."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfperf.data.manifest import load_manifest

from helpers.convertkit import read_back


def test_cli_preprocess_module_function_with_output_schema(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prep_mod_a.py").write_text(
        "import numpy as np\n"
        "def heavy(row):\n    return {'y': np.float64(row['x'].sum()), 'n': row['x'].size}\n"
    )
    feats = [{"name": "y", "dtype": "float64"}, {"name": "n", "dtype": "int32"}]
    (tmp_path / "out_schema.json").write_text(json.dumps({"features": feats}))
    np.savez(tmp_path / "d.npz", x=np.ones((5, 3)))
    res = cli(
        "convert",
        "d.npz",
        "--out",
        "o",
        "--preprocess",
        "prep_mod_a:heavy",
        "--schema",
        "out_schema.json",
        "--quiet",
        "--workers",
        "1",
    )
    assert res.exit_code == 0, res.output
    got = read_back(tmp_path / "o")
    assert [(r["y"].item(), r["n"].item()) for r in got] == [(3.0, 3)] * 5
    assert got[0]["n"].dtype == np.int32
    res = cli("convert", "d.npz", "--out", "o3", "--preprocess", "prep_mod_a:nope")
    assert res.exit_code == 2 and "has no attribute 'nope'" in res.stderr


def test_max_examples_name_and_json(tmp_path, cli):
    np.savez(tmp_path / "d.npz", x=np.arange(100))
    res = cli(
        "convert",
        tmp_path / "d.npz",
        "--out",
        tmp_path / "o",
        "--max-examples",
        "7",
        "--name",
        "tiny",
        "--split",
        "dev",
        "--json",
        "--quiet",
    )
    assert res.exit_code == 0, res.output
    s = json.loads(res.stdout)
    assert (s["name"], s["split"], s["records"], s["shards"]) == ("tiny", "dev", 7, 1)
    assert (tmp_path / "o" / "tiny-dev.tfrecord-00000-of-00001").exists()
    for bad in (
        ["--shard-size", "lots"],
        ["--compression", "zip"],
        ["--on-bad-row", "ignore"],
        ["--workers", "0"],
    ):
        res = cli("convert", tmp_path / "d.npz", "--out", tmp_path / "o2", "--quiet", *bad)
        assert res.exit_code == 2 and bad[0] in res.stderr, (bad, res.output)


def test_convert_help_explains_every_option(cli):
    res = cli("convert", "--help")
    for opt in (
        "--schema",
        "--preprocess",
        "--shard-size",
        "--workers",
        "--compression",
        "--resume",
        "--on-bad-row",
        "--max-examples",
        "--split",
        "--name",
        "--out",
        "--json",
        "--quiet",
        "--workload",
        "--image-size",
    ):
        assert opt in res.stdout


def test_convert_builtin_workload_cli(tmp_path, cli):
    from tfperf.workloads import get_workload

    try:
        get_workload("regression")
    except (ImportError, AttributeError):
        pytest.skip("the regression workload is not available")
    res = cli(
        "convert",
        "--workload",
        "regression",
        "--out",
        tmp_path / "d",
        "--examples",
        "40",
        "--eval-examples",
        "8",
        "--quiet",
        "--json",
        "--workers",
        "1",
    )
    assert res.exit_code == 0, res.output
    m = load_manifest(tmp_path / "d")
    assert m.splits["train"].records == 40 and m.splits["eval"].records == 8


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_convert_distance_maps_workload_cli(tmp_path, cli, workers):
    from tfperf.workloads.distance_maps import distance_maps

    out = tmp_path / "d"
    # Small shards so that several workers get work.
    res = cli(
        "convert",
        "--workload",
        "distance_maps",
        "--examples",
        "64",
        "--eval-examples",
        "16",
        "--out",
        out,
        "--workers",
        str(workers),
        "--shard-size",
        "64KiB",
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert "in this process" not in res.output  # the workers did the work
    m = load_manifest(out)
    assert {k: v.records for k, v in m.splits.items()} == {
        "train": 64,
        "eval": 16,
        "train_raw": 64,
        "eval_raw": 16,
    }
    assert len(m.splits["train"].shards) > workers
    assert m.preprocess.startswith("workload distance_maps: offline_preprocess(")
    for split in ("train", "eval"):
        raw, tuned = read_back(out, f"{split}_raw"), read_back(out, split)
        for r, t in zip(raw, tuned, strict=True):
            np.testing.assert_array_equal(t["image"], r["image"])
            np.testing.assert_array_equal(t["dist"], distance_maps(r["clicks"], 64))
