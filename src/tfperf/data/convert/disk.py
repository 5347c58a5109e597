"""A full disk during `convert`: one error naming the output folder, the free space on its
disk and about how much the shards not yet written still need, saying that `--resume`
continues (the finished shards are kept) once that much is free."""

from __future__ import annotations

from pathlib import Path

from tfperf.data.convert.resume import Progress
from tfperf.util.disk import NO_SPACE, DiskFullError, free_text, size_text


def convert_disk_full(out: Path, split: str, progress: Progress, shard_bytes: int) -> DiskFullError:
    """The error for a convert into `out` that ran out of space; `shard_bytes` is
    --shard-size, for the estimate when no shard is finished yet."""
    plan, done = progress.plan, list(progress.finished.values())
    rows_left = plan.num_rows - progress.done_rows
    if done and sum(s["records"] for s in done):
        # Finished shards say what a record really takes (after compression too).
        per_record = sum(s["bytes"] for s in done) / sum(s["records"] for s in done)
    else:
        per_record = shard_bytes / plan.records_per_shard  # the plan's own estimate
    left = plan.num_shards - len(done)
    if left:
        need = (
            f"the {left} shard(s) not yet written need about "
            f"{size_text(rows_left * per_record)} more ({rows_left:,} records at "
            f"~{per_record:,.0f} bytes)"
        )
    else:
        need = "every shard is written; manifest.json and the rejects file need a few KiB"
    return DiskFullError(
        f"convert into {out} (split '{split}'): the disk holding {out} is full "
        f"({free_text(out)}): {NO_SPACE}; {need}. Free that much there and run the same "
        f"command with --resume ({len(done)} finished shard(s) are kept), or convert into "
        "an --out on another disk"
    )
