"""`convert` into a folder that holds a dataset with another schema is refused, naming both
schemas; `--overwrite` replaces the old splits (their shards go). A built-in workload's raw
splits, whose schema differs on purpose, keep working."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import load_manifest
from tfperf.data.verify import verify_dir


def _two_datasets(tmp_path):
    (tmp_path / "people.csv").write_text("id,score\n1,0.5\n2,1.5\n3,2.5\n")
    np.savez(tmp_path / "pixels.npz", img=np.zeros((4, 2, 2), np.uint8), y=np.arange(4))
    return tmp_path / "people.csv", tmp_path / "pixels.npz"


def test_another_schema_into_the_same_split_is_refused_then_overwritten(tmp_path, cli):
    csv, npz = _two_datasets(tmp_path)
    out = tmp_path / "o"
    first = convert(csv, out, workers=1, progress=False)
    old_files = sorted(p.name for p in out.iterdir())
    res = cli("convert", npz, "--out", out, "--quiet")
    assert res.exit_code == 2, res.output
    msg = " ".join(res.stderr.split())
    assert "split 'train'" in msg and "--overwrite" in msg
    assert "id int64, score float32" in msg  # the old schema
    assert "img uint8 [2, 2], y int64" in msg  # the new one
    assert load_manifest(out) == first  # nothing changed
    assert sorted(p.name for p in out.iterdir()) == old_files

    res = cli("convert", npz, "--out", out, "--quiet", "--overwrite")
    assert res.exit_code == 0, res.output
    m = load_manifest(out)
    assert m.name == "pixels" and m.schema.names == ["img", "y"] and list(m.splits) == ["train"]
    assert not list(out.glob("people-*"))  # the old split's shards are gone
    assert verify_dir(out, m).ok


def test_a_new_split_with_another_schema_is_refused_then_replaces_the_dataset(tmp_path):
    csv, npz = _two_datasets(tmp_path)
    out = tmp_path / "o"
    convert(csv, out, workers=1, progress=False)
    convert(csv, out, split="eval", workers=1, progress=False)  # same schema: added beside
    assert set(load_manifest(out).splits) == {"train", "eval"}
    with pytest.raises(ConvertError) as err:
        convert(npz, out, split="test", workers=1, progress=False)
    msg = str(err.value)
    assert "splits eval, train" in msg and "another schema" in msg and "--overwrite" in msg
    assert set(load_manifest(out).splits) == {"train", "eval"}
    m = convert(npz, out, split="test", overwrite=True, workers=1, progress=False)
    assert list(m.splits) == ["test"] and m.schema.names == ["img", "y"]
    assert m.splits["test"].schema_ is None  # the manifest's schema is the new one
    assert sorted(p.name for p in out.glob("*.tfrecord-*")) == [
        "pixels-test.tfrecord-00000-of-00001"
    ]


def test_the_same_schema_into_the_same_split_replaces_it_without_leftovers(tmp_path):
    csv, _ = _two_datasets(tmp_path)
    out = tmp_path / "o"
    convert(csv, out, workers=1, progress=False)
    m = convert(csv, out, name="renamed", workers=1, progress=False)
    assert m.splits["train"].shards[0].file.startswith("renamed-train.")
    assert sorted(p.name for p in out.glob("*.tfrecord-*")) == [
        "renamed-train.tfrecord-00000-of-00001"
    ]


def test_overwrite_with_a_workload_is_refused_clearly(tmp_path, cli):
    res = cli("convert", "--workload", "regression", "--out", tmp_path / "o", "--overwrite")
    assert res.exit_code == 2 and "--overwrite: only with SOURCE" in res.stderr, res.output


def test_json_summary_names_the_schema_of_the_split(tmp_path, cli):
    csv, _ = _two_datasets(tmp_path)
    res = cli("convert", csv, "--out", tmp_path / "o", "--quiet", "--json")
    assert res.exit_code == 0, res.output
    assert [f["name"] for f in json.loads(res.stdout)["schema"]] == ["id", "score"]
