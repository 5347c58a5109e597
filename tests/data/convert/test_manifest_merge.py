"""data/convert/manifest_merge.py: how a split joins its folder's manifest (conflicts, its
own schema, unknown keys kept, removed splits' files deleted); `convert` into a folder that
holds a dataset with another schema is refused, naming both schemas; `--overwrite` replaces
the old splits (their shards go). A built-in workload's raw splits, whose schema differs on
purpose, keep working."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tfperf.data.convert.manifest_merge import (
    DatasetFields,
    conflicts,
    merge_split,
    remove_splits,
    split_files,
)
from tfperf.data.convert.run import ConvertError, convert
from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, load_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.data.shards import LABELS_FILE
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


XY = Schema.of(Feature(name="x", dtype="int64"), Feature(name="y", dtype="int64"))
RAW = Schema.of(Feature(name="raw", dtype="bytes"))
FIELDS = DatasetFields("d", "", "d.csv", None, "deblur", False)


def _split(name: str, split: str) -> SplitInfo:
    shard = ShardInfo(
        file=f"{name}-{split}.tfrecord-00000-of-00001", records=3, bytes=9, sha256="-"
    )
    return SplitInfo(shards=[shard], records=3)


def test_another_schema_conflicts_except_beside_its_own_workloads_raw_splits():
    m = merge_split(None, "train", _split("d", "train"), XY, FIELDS)
    assert conflicts(m, "eval", XY, None) == []
    assert conflicts(m, "eval", RAW, None) == ["train"]
    assert conflicts(m, "train_raw", RAW, "deblur") == []  # the same workload: on purpose
    assert conflicts(m, "train", RAW, "deblur") == ["train"]  # the split itself: never


def test_a_split_of_another_schema_keeps_its_own():
    m = merge_split(None, "train", _split("d", "train"), XY, FIELDS)
    assert m.schema == XY and m.workload == "deblur" and m.source == "d.csv"
    m = merge_split(m, "train_raw", _split("d", "train_raw"), RAW, FIELDS)
    assert m.split_schema("train_raw") == RAW and m.split_schema("train") == XY
    assert m.splits["train"].schema_ is None  # the manifest's schema
    again = merge_split(m, "train", _split("d", "train"), XY, FIELDS)
    assert set(again.splits) == {"train", "train_raw"} and again.schema == XY


def test_replacing_the_only_split_keeps_the_manifests_unknown_keys():
    m = merge_split(None, "train", _split("d", "train"), XY, FIELDS)
    m = Manifest.model_validate({**m.model_dump(by_alias=True), "owner": "team-a"})
    replaced = merge_split(m, "train", _split("e", "train"), RAW, FIELDS)
    assert replaced.schema == RAW and replaced.model_extra == {"owner": "team-a"}


def test_removed_splits_take_their_files_and_the_labels_of_a_dataset_gone(tmp_path):
    m = merge_split(None, "train", _split("d", "train"), XY, FIELDS)
    m.splits["train"].rejects_file = "d-train.rejects.jsonl"
    m = merge_split(m, "eval", _split("d", "eval"), XY, FIELDS)
    for name in [*split_files(m.splits["train"]), *split_files(m.splits["eval"]), LABELS_FILE]:
        (tmp_path / name).write_text("x")
    left = remove_splits(tmp_path, m, ["train"])
    assert list(left.splits) == ["eval"] and set(m.splits) == {"train", "eval"}  # a copy
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "d-eval.tfrecord-00000-of-00001", LABELS_FILE,
    ]  # fmt: skip
    remove_splits(tmp_path, left, ["eval"])
    assert list(tmp_path.iterdir()) == []
