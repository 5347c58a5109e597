"""manifest.json is tolerant and documented: unknown keys (at every level) are read, ignored
and kept when convert rewrites the file; a newer major format is refused by name; and
docs/manifest.md names every field the models have."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tfperf.data.convert.run import convert
from tfperf.data.manifest import Manifest, ManifestError, ShardInfo, SplitInfo, load_manifest
from tfperf.data.schema import Feature

DOC = Path(__file__).resolve().parents[2] / "docs" / "manifest.md"


def _dataset(tmp_path) -> Path:
    np.savez(tmp_path / "d.npz", x=np.arange(10, dtype=np.int64))
    convert(tmp_path / "d.npz", tmp_path / "o", workers=1, progress=False)
    return tmp_path / "o"


def test_unknown_keys_are_read_ignored_and_kept(tmp_path):
    out = _dataset(tmp_path)
    path = out / "manifest.json"
    data = json.loads(path.read_text())
    data["made_by"] = {"tool": "a newer tfperf"}
    data["splits"]["train"]["note"] = "checked by hand"
    data["splits"]["train"]["shards"][0]["host"] = "disk7"
    data["schema"]["features"][0]["doc"] = "row id"
    path.write_text(json.dumps(data))
    m = load_manifest(out)
    assert m.splits["train"].records == 10 and m.schema.names == ["x"]
    convert(tmp_path / "d.npz", out, split="eval", workers=1, progress=False)
    again = json.loads(path.read_text())
    assert set(again["splits"]) == {"train", "eval"}
    assert again["made_by"] == {"tool": "a newer tfperf"}
    assert again["splits"]["train"]["note"] == "checked by hand"
    assert again["splits"]["train"]["shards"][0]["host"] == "disk7"
    assert again["schema"]["features"][0]["doc"] == "row id"


def test_a_newer_major_format_is_refused_by_name(tmp_path):
    out = _dataset(tmp_path)
    path = out / "manifest.json"
    data = json.loads(path.read_text())
    data["format"] = "tfperf.manifest/2"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError, match=r"format 'tfperf.manifest/2' is not one this tfperf"):
        load_manifest(out)


def test_the_doc_names_every_field():
    text = DOC.read_text()
    for model in (Manifest, SplitInfo, ShardInfo, Feature):
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert f"`{key}`" in text, (model.__name__, key)
    assert "tfperf.manifest/1" in text and "unknown keys" in text.lower()
