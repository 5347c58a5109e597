"""The line a run stopped by SIGTERM/SIGINT prints before its last save: the step and, when
the checkpoint holds the input iterator, how large it is, because saving a big shuffle
buffer takes seconds and the wait must not look like a hang."""

from __future__ import annotations

from pathlib import Path

from tfperf.config import RunConfig
from tfperf.train.checkpoints.disk_full import newest_checkpoint_bytes
from tfperf.train.checkpoints.save import CheckpointHook, iterator_checkpoint_bytes
from tfperf.train.run_input import mean_record_bytes
from tfperf.util.disk import size_text


def _input_size(cfg: RunConfig, hook: CheckpointHook) -> str:
    """How large the save with the iterator is: the last checkpoint's size (the next one
    holds as much), else the shuffle buffer's estimate, else nothing known."""
    size = newest_checkpoint_bytes(Path(hook.manager.directory))
    if size:
        return f"~{size_text(size)}, as large as the last checkpoint"
    buffer = cfg.pipeline.shuffle_buffer
    record = mean_record_bytes(cfg)  # 0 for a user's data.pipeline: its buffers are unknown
    if buffer > 1 and record:
        estimate = iterator_checkpoint_bytes(buffer, record)
        return f"its shuffle buffer: ~{size_text(estimate)} for {buffer:,} records of ~{record:,} B"
    return "its size is known once written"


def stop_note(cfg: RunConfig, signal: str, step: int, hook: CheckpointHook | None) -> str:
    """'SIGINT: saving a checkpoint at step N with the input iterator (~45 MiB, ...) and
    stopping; run the same command to resume'."""
    saving = f"saving a checkpoint at step {step}"
    if hook is not None and hook.saves_input:
        saving += f" with the input iterator ({_input_size(cfg, hook)})"
    return f"{signal}: {saving} and stopping; run the same command to resume"
