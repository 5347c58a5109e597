"""How `convert --resume` knows what an interrupted run left: the progress file of an
unfinished split (a fingerprint of the run's options, its shard plan, its finished shards
with sha256), the checks that decide which shards to keep, and removing leftovers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.data.convert.options import ConvertError, ConvertOptions
from tfperf.data.manifest import Manifest
from tfperf.data.schema import Schema
from tfperf.data.shards import ShardPlan, is_leftover, progress_name
from tfperf.data.source_fingerprint import describe_change, source_fingerprint
from tfperf.data.sources import RowSource
from tfperf.data.verify import file_sha256, verify_dir
from tfperf.util.files import write_text_atomic

PROGRESS_FORMAT = "tfperf.progress/1"


def fingerprint(
    src: RowSource, rows: int, schema: Schema, preprocess: str | None, options: ConvertOptions
) -> dict[str, Any]:
    """What must not change between an interrupted run and its --resume."""
    return {
        "source": str(Path(src.path).resolve()) if src.random_access else src.path,
        "rows": rows,
        "schema": schema.model_dump(mode="json"),
        "preprocess": preprocess,
        "compression": options.compression,
        "on_bad_row": options.on_bad_row,
        "shuffle_seed": src.shuffle_seed,  # image folders: the order of the files
        # The same path may hold other data by now: its size, time and a hash.
        "content": source_fingerprint(src.path) if src.random_access else None,
        "shard_bytes": options.shard_bytes,  # --shard-size: the plan's records per shard
    }


@dataclass
class Progress:
    """The progress file of one split being written; saved after every finished shard."""

    path: Path
    fingerprint: dict[str, Any]
    plan: ShardPlan
    finished: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> ShardInfo

    @property
    def done_rows(self) -> int:
        return sum(self.plan.spans[i].rows for i in self.finished)

    def add(self, index: int, info: dict[str, Any]) -> None:
        """Records a finished shard on disk, so that --resume knows it is done."""
        self.finished[index] = info
        self.save()

    def save(self) -> None:
        state = {
            "format": PROGRESS_FORMAT,
            "fingerprint": self.fingerprint,
            "plan": self.plan.to_dict(),
            "shards": {str(k): v for k, v in sorted(self.finished.items())},
        }
        write_text_atomic(self.path, json.dumps(state, indent=1) + "\n")


@dataclass
class ResumePoint:
    """Where a run starts: its progress (plan, shards to keep) and notes for the user;
    `complete` when the split is already written and intact (nothing to do)."""

    progress: Progress
    notes: list[str]
    complete: bool = False


def resume_point(
    out: Path,
    name: str,
    split: str,
    fingerprint: dict[str, Any],
    plan: ShardPlan,
    existing: Manifest | None,
    resume: bool,
) -> ResumePoint:
    """Without `resume`: a fresh start. With it: the interrupted run's plan and its intact
    shards (the same options required), else a check of an already finished split."""
    progress = Progress(out / progress_name(name, split), fingerprint, plan)
    notes: list[str] = []
    if resume and progress.path.exists():
        state = json.loads(progress.path.read_text())
        old = state["fingerprint"]
        differ = [k for k in fingerprint if old.get(k) != fingerprint[k]]
        if differ:
            raise ConvertError(
                f"{progress.path}: cannot resume: {', '.join(differ)} differ from the "
                f"interrupted run{_details(old, fingerprint, differ)}; rerun without --resume "
                "to start over"
            )
        progress.plan = ShardPlan.from_dict(state["plan"])
        for key, info in state["shards"].items():
            path = out / info["file"]
            if path.exists() and file_sha256(path) == (info["sha256"], info["bytes"]):
                progress.finished[int(key)] = info
            else:
                notes.append(f"shard {info['file']}: damaged or missing; writing it again")
        done = len(progress.finished)
        notes.append(f"resuming: {done} of {progress.plan.num_shards} shards already done")
    elif resume:
        _refuse_other_name(out, name, split, existing)
        if existing is not None and split in existing.splits:
            bad = [r for r in verify_dir(out, existing).damaged if r.split == split]
            if not bad:
                notes.append(f"split '{split}' is already complete; shards verified")
                return ResumePoint(progress, notes, complete=True)
            notes.append(f"split '{split}': {len(bad)} damaged shards; converting it again")
        else:
            notes.append("nothing to resume here; starting")
    return ResumePoint(progress, notes)


def _details(old: dict[str, Any], new: dict[str, Any], differ: list[str]) -> str:
    """Words for the differences a user can act on (content, --shard-size)."""
    said = []
    if "content" in differ:
        said.append(
            f"source {new['source']}: {describe_change(old.get('content'), new['content'])}"
        )
    if "shard_bytes" in differ:
        said.append(f"--shard-size was {old.get('shard_bytes')} bytes, now {new['shard_bytes']}")
    return f" ({'; '.join(said)})" if said else ""


def _refuse_other_name(out: Path, name: str, split: str, existing: Manifest | None) -> None:
    """--resume with another --name than the run it continues: refused, naming the old one
    (else the old run's shards would be left behind and a new set written beside them)."""
    others = [
        p for p in out.glob(f".*-{split}.progress.json") if p.name != progress_name(name, split)
    ]
    if others:
        old = others[0].name[1:].split("-")[0]
        raise ConvertError(
            f"{others[0]}: cannot resume: the interrupted convert of split '{split}' is named "
            f"'{old}', not '{name}'; resume with --name {old}, or rerun without --resume"
        )
    if existing is not None and split in existing.splits and existing.name != name:
        raise ConvertError(
            f"{out / 'manifest.json'}: cannot resume: split '{split}' was written as "
            f"'{existing.name}', not '{name}'; resume with --name {existing.name}, or rerun "
            "without --resume"
        )


def remove_stale(
    out: Path, name: str, split: str, keep: set[str] | frozenset[str] = frozenset()
) -> None:
    """Deletes leftovers of this split: temporary files, rejects parts, old shards."""
    for p in out.iterdir():
        if p.name not in keep and is_leftover(p.name, name, split):
            p.unlink(missing_ok=True)
