"""TFDS metadata for a converted folder: dataset_info.json and features.json beside the
shards, so that `tfds.builder_from_directory(DIR)` reads them without tfperf. They are
written in the JSON forms TFDS reads (writing them needs no tensorflow-datasets).

Shards keep their names: each split's entry gives TFDS its file pattern. A split name TFDS
cannot take (a '.' in it) is mapped ('.' -> '_'); splits whose records have another schema
than the manifest's are left out, since a TFDS dataset has one set of features.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.data.manifest import Manifest, load_manifest
from tfperf.data.schema import Feature
from tfperf.errors import UserError
from tfperf.util.files import write_text_atomic

DATASET_INFO = "dataset_info.json"
FEATURES = "features.json"
_TENSOR = "tensorflow_datasets.core.features.tensor_feature.Tensor"
_FEATURES_DICT = "tensorflow_datasets.core.features.features_dict.FeaturesDict"
_SHARD_RE = re.compile(r"(?P<stem>.+)\.tfrecord-(?P<index>\d+)-of-(?P<count>\d+)")
_MIN_SHARD_DIGITS = 5  # TFDS pads shard numbers to max(5, digits of the count)


class TfdsExportError(UserError):
    """A dataset TFDS could not read as it is; the message says what to change."""


@dataclass
class TfdsExport:
    """TFDS's view of a folder: its two JSON files' contents, tfperf split -> TFDS split,
    and the splits left out."""

    root: Path
    info: dict[str, Any]
    features: dict[str, Any]
    splits: dict[str, str]
    left_out: list[str] = field(default_factory=list)

    @property
    def files(self) -> list[Path]:
        return [self.root / DATASET_INFO, self.root / FEATURES]

    def write(self) -> TfdsExport:
        write_text_atomic(self.files[0], json.dumps(self.info, indent=2) + "\n")
        write_text_atomic(self.files[1], json.dumps(self.features, indent=2) + "\n")
        return self

    def notes(self) -> list[str]:
        out = [f"TFDS calls split '{a}' '{b}'" for a, b in self.splits.items() if a != b]
        if self.left_out:
            out.append(
                f"TFDS metadata leaves out splits {', '.join(self.left_out)}: their records "
                f"have another schema than the dataset's"
            )
        return out


def tfds_feature(f: Feature) -> dict[str, Any]:
    """One feature as TFDS's Tensor connector: raw-bytes storage is its 'bytes' encoding
    (little-endian, decoded with decode_raw); a varlen feature has shape [-1]."""
    shape = [-1] if f.varlen else list(f.shape)
    tensor = {
        "dtype": "string" if f.dtype == "bytes" else f.dtype,
        "encoding": "bytes" if f.raw else "none",
        "shape": {"dimensions": [str(d) for d in shape]} if shape else {},
    }
    return {"pythonClassName": _TENSOR, "tensor": tensor}


def tfds_name(name: str) -> str:
    """A name TFDS takes: letters, digits and '_' (a '.' becomes '_')."""
    return name.replace(".", "_")


def _file_template(split: str, files: list[str]) -> str:
    """TFDS's file pattern of a split's shards, checked against every shard's name."""
    first = _SHARD_RE.fullmatch(files[0])
    if first is None:
        raise TfdsExportError(
            f"split '{split}': shard {files[0]} is not named NAME-SPLIT.tfrecord-"
        )
    digits = max(_MIN_SHARD_DIGITS, len(str(len(files))))
    for i, f in enumerate(files):
        want = f"{first['stem']}.tfrecord-{i:0{digits}d}-of-{len(files):0{digits}d}"
        if f != want:
            raise TfdsExportError(
                f"split '{split}': shard {f} is not named as TFDS expects ({want}); convert "
                f"the split again"
            )
    return f"{first['stem']}.tfrecord-{{SHARD_X_OF_Y}}"


def write_tfds_metadata(root: str | Path, manifest: Manifest | None = None) -> TfdsExport:
    """Writes ROOT/dataset_info.json and ROOT/features.json for the manifest's splits."""
    return tfds_view(root, manifest).write()


def tfds_view(root: str | Path, manifest: Manifest | None = None) -> TfdsExport:
    """What write_tfds_metadata writes for ROOT (its manifest, or `manifest`)."""
    root = Path(root)
    m = manifest if manifest is not None else load_manifest(root)
    if m.compression:
        raise TfdsExportError(
            f"{root}: TFDS reads uncompressed TFRecord shards only, these are "
            f"{m.compression}; convert with --compression none"
        )
    splits = [s for s in m.splits if m.schema.same_records(m.split_schema(s))]
    names = {s: tfds_name(s) for s in splits}
    clash = [(a, b) for a in splits for b in splits if a < b and names[a] == names[b]]
    if clash:
        a, b = clash[0]
        raise TfdsExportError(
            f"{root}: splits '{a}' and '{b}' are both '{names[a]}' for TFDS (it takes no '.' "
            f"in split names); convert one of them under another --split"
        )
    entries = []
    for s in splits:
        shards = m.splits[s].shards
        entries.append(
            {
                "name": names[s],
                "filepathTemplate": _file_template(s, [sh.file for sh in shards]),
                "shardLengths": [str(sh.records) for sh in shards],
                "numBytes": str(sum(sh.bytes for sh in shards)),
            }
        )
    info = {
        "name": tfds_name(m.name),
        "description": f"Converted by tfperf from {m.source or 'rows'}.",
        "version": "1.0.0",
        "fileFormat": "tfrecord",
        "splits": entries,
    }
    feats = {f.name: tfds_feature(f) for f in m.schema.features}
    features = {"pythonClassName": _FEATURES_DICT, "featuresDict": {"features": feats}}
    return TfdsExport(root, info, features, names, [s for s in m.splits if s not in names])
