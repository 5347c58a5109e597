"""manifest.json: what `convert` wrote (schema, shards with counts, bytes and checksums,
rejected rows), read back by the pipeline, `inspect` and `--resume`. Writes are atomic.

docs/manifest.md is its spec. Unknown keys, at every level, are kept and ignored (a newer
tfperf may add some); a manifest of another major format version is refused by name.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tfperf.data.schema import Schema
from tfperf.errors import UserError
from tfperf.util.files import write_text_atomic
from tfperf.util.format import quoted

MANIFEST_NAME = "manifest.json"
FORMAT = "tfperf.manifest/1"  # "tfperf.manifest/MAJOR": readers read their own major only


class ManifestError(UserError):
    """A missing or malformed manifest; the message names the file."""


class ShardInfo(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown keys: kept and ignored

    file: str  # relative to the manifest's directory
    records: int = Field(ge=0)
    bytes: int = Field(ge=0)
    sha256: str
    first_row: int = Field(ge=0, default=0)  # index of the first source row in this shard


class SplitInfo(BaseModel):
    shards: list[ShardInfo] = []
    records: int = 0
    rejected: int = 0  # rows sent to the rejects file with --on-bad-row skip
    rejects_file: str | None = None
    # Set when this split's records differ from the manifest's schema (e.g. a workload's
    # raw splits beside its preprocessed ones); None: the manifest's schema.
    schema_: Schema | None = Field(None, alias="schema")

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Manifest(BaseModel):
    format: str = FORMAT  # load_manifest refuses another major version
    name: str
    schema_: Schema = Field(alias="schema")
    compression: Literal["", "GZIP"] = ""
    splits: dict[str, SplitInfo] = {}
    source: str = ""
    preprocess: str | None = None  # 'module:function' applied during convert, if any
    workload: str | None = None  # the built-in workload whose data this is, if any
    tfds_metadata: bool = False  # convert keeps TFDS's dataset_info.json/features.json current

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @property
    def schema(self) -> Schema:  # type: ignore[override]
        return self.schema_

    def split_schema(self, split: str) -> Schema:
        """The schema of one split's records (its own, else the manifest's)."""
        info = self.splits.get(split)
        return info.schema_ if info is not None and info.schema_ is not None else self.schema_

    def shard_paths(self, root: str | Path, split: str) -> list[str]:
        if split not in self.splits:
            raise ManifestError(
                f"{Path(root) / MANIFEST_NAME}: no split '{split}'; "
                f"found {sorted(self.splits) or 'none'}"
            )
        return [self.shard_path(root, split, s.file) for s in self.splits[split].shards]

    def readable_shard_paths(
        self, root: str | Path, split: str, *, check_sizes: bool = False
    ) -> list[str]:
        """`shard_paths`, each checked to exist and open for reading: a missing shard is a
        named error before a pipeline starts (TensorFlow's NotFoundError names no split,
        and on_corrupt=skip would spin on it). check_sizes (on_corrupt=error): a shard whose
        size differs from the manifest's (0 bytes, cut at a record boundary) is one too,
        since TensorFlow reads such a file without a word; a stat, so the pipeline stays
        as fast."""
        paths = self.shard_paths(root, split)
        where = f"{Path(root) / MANIFEST_NAME}: split '{split}': shard"
        for path, info in zip(paths, self.splits[split].shards, strict=True):
            try:
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
            except OSError as exc:
                problem = (
                    "is missing"
                    if isinstance(exc, FileNotFoundError)
                    else (f"is unreadable ({exc.strerror or exc})")
                )
                raise ManifestError(
                    f"{where} {info.file} listed in manifest.json {problem}; expected every "
                    f"listed shard in {root}. pipeline.on_corrupt=skip skips damaged records, "
                    "not missing files: restore the file or convert the split again "
                    "(`tfperf convert --overwrite`)"
                ) from None
            if check_sizes and size != info.bytes:
                raise ManifestError(
                    f"{where} {info.file} holds {size} bytes, but manifest.json lists "
                    f"{info.bytes} bytes ({info.records} records): a cut or replaced shard, "
                    "whose lost records pipeline.on_corrupt=error would not notice. Rewrite "
                    "it (`tfperf convert --overwrite`), or set pipeline.on_corrupt=skip to "
                    "read what is left (the records lost each epoch are reported)"
                )
        return paths

    def shard_path(self, root: str | Path, split: str, file: str) -> str:
        """ROOT/file, refused (ManifestError) unless it names a file inside ROOT: a manifest
        must not make tfperf read (or, on --overwrite, delete) files elsewhere."""
        _check_file_name(Path(root) / MANIFEST_NAME, split, file)
        path = Path(root) / file
        # Resolved, so that a symlink in the folder cannot lead outside it either.
        if path.resolve().parent != Path(root).resolve():
            raise ManifestError(
                f"{Path(root) / MANIFEST_NAME}: split '{split}' lists shard {quoted(file)}, which "
                f"resolves to {path.resolve()}, outside the dataset folder {Path(root).resolve()}"
                "; expected a file inside that folder. Convert the data again or fix the entry"
            )
        return str(path)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2) + "\n"


def manifest_path(path: str | Path) -> Path:
    p = Path(path)
    return p if p.name == MANIFEST_NAME or p.suffix == ".json" else p / MANIFEST_NAME


def load_manifest(path: str | Path) -> Manifest:
    """Reads DIR/manifest.json (or the given .json file) with an error naming the file."""
    p = manifest_path(path)
    if not p.exists():
        raise ManifestError(f"{p}: no manifest here; run `tfperf convert` to make one")
    try:
        data = json.loads(p.read_text())
        found = data.get("format", FORMAT) if isinstance(data, dict) else FORMAT
        if found != FORMAT:
            raise ManifestError(
                f"{p}: format {quoted(found)} is not one this tfperf reads ({FORMAT}); read it "
                f"with the tfperf that wrote it, or convert the data again"
            )
        manifest = Manifest.model_validate(data)
    except (json.JSONDecodeError, ValidationError) as exc:
        raise ManifestError(f"{p}: not a valid tfperf manifest: {exc}") from None
    for split, info in manifest.splits.items():
        for name in [s.file for s in info.shards] + [info.rejects_file or "x"]:
            _check_file_name(p, split, name)
    return manifest


def _check_file_name(manifest_file: Path, split: str, name: str) -> None:
    """Refuses a shard/rejects name that is not a plain file name in the dataset folder."""
    if name in ("", ".", "..") or any(c in name for c in "/\\\0") or Path(name).is_absolute():
        raise ManifestError(
            f"{manifest_file}: split '{split}' lists file {quoted(name)}; expected a plain file "
            "name inside the dataset folder (no '/', '\\', '..' or absolute path), as "
            "`tfperf convert` writes. Convert the data again or fix the entry"
        )


def save_manifest(manifest: Manifest, directory: str | Path) -> Path:
    """Writes manifest.json atomically (temp file + rename), so readers never see half."""
    p = manifest_path(directory)
    p.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(p, manifest.to_json())
