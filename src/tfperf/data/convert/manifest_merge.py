"""How a converted split joins the manifest.json of its folder: which splits it conflicts
with (records of another schema), removing those under --overwrite, and the merged manifest
(every split's schema stays accurate; unknown keys are kept). The caller holds the
manifest lock (lock.py) around read, merge and write.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tfperf.data.convert.options import ConvertError
from tfperf.data.manifest import Manifest, SplitInfo, manifest_path
from tfperf.data.schema import Schema
from tfperf.data.shards import LABELS_FILE


@dataclass(frozen=True)
class DatasetFields:
    """What a convert says about the whole dataset when its split starts a manifest."""

    name: str
    compression: str
    source: str
    preprocess: str | None
    workload: str | None
    tfds_metadata: bool


def conflicts(m: Manifest, split: str, schema: Schema, workload: str | None) -> list[str]:
    """Splits of `m` that cannot stay beside `split` written with `schema`: `split` itself
    when its records have another schema, and every split with another schema, except
    beside the same built-in workload's data (its raw splits differ on purpose)."""
    same_workload = workload is not None and workload == m.workload
    return sorted(
        s
        for s in m.splits
        if not schema.same_records(m.split_schema(s)) and (s == split or not same_workload)
    )


def check_conflicts(
    out: Path, m: Manifest, split: str, schema: Schema, workload: str | None, overwrite: bool
) -> list[str]:
    """The conflicting splits, which --overwrite replaces; without it a ConvertError that
    names both schemas."""
    found = conflicts(m, split, schema, workload)
    if not found or overwrite:
        return found
    which = f"split '{found[0]}'" if len(found) == 1 else f"splits {', '.join(found)}"
    verb = "holds" if len(found) == 1 else "hold"
    old = "; ".join(sorted({m.split_schema(s).describe() for s in found}))
    raise ConvertError(
        f"{manifest_path(out)}: {which} {verb} records of another schema ({old}) than this "
        f"convert of split '{split}' writes ({schema.describe()}); a folder holds one dataset. "
        f"Convert into another --out, or add --overwrite to replace {which} (removing its "
        f"shards)"
    )


def split_files(info: SplitInfo) -> list[str]:
    """The files a split's manifest entry names: its shards and rejects file."""
    return [s.file for s in info.shards] + ([info.rejects_file] if info.rejects_file else [])


def remove_splits(out: Path, m: Manifest, names: list[str]) -> Manifest:
    """`m` without the splits `names`, whose shards and rejects files are deleted."""
    kept = m.model_copy(deep=True)
    for name in names:
        for f in split_files(kept.splits.pop(name)):
            (out / f).unlink(missing_ok=True)
    if not kept.splits:
        (out / LABELS_FILE).unlink(missing_ok=True)  # the class names of a dataset now gone
    return kept


def merge_split(
    current: Manifest | None, split: str, info: SplitInfo, schema: Schema, fields: DatasetFields
) -> Manifest:
    """`current` (as re-read under the lock) with `split` added or replaced."""
    if current is None or set(current.splits) <= {split}:
        extra = dict(current.model_extra or {}) if current is not None else {}
        return Manifest(
            name=fields.name,
            schema=schema,
            compression=fields.compression,
            splits={split: info},
            source=fields.source,
            preprocess=fields.preprocess,
            workload=fields.workload,
            tfds_metadata=fields.tfds_metadata or bool(current and current.tfds_metadata),
            **extra,  # unknown keys of the manifest this one replaces are kept
        )
    m = current.model_copy(deep=True)
    m.splits[split] = info
    if all(s.schema_ is not None for k, s in m.splits.items() if k != split):
        m.schema_ = schema  # no other split uses the manifest's schema: this one becomes it
    info.schema_ = None if schema.same_records(m.schema_) else schema
    m.workload = m.workload or fields.workload
    m.tfds_metadata = m.tfds_metadata or fields.tfds_metadata
    return m
