"""A run's folders on disk and reading its checkpoints folder without TensorFlow: which
checkpoints are finished (listed in the manager's state file, with their .index and every
data shard), and the FINAL marker the loop writes when training ends normally.

Layout: {out_dir}/checkpoints/ckpt-N (N = step), {out_dir}/checkpoints/FINAL,
{out_dir}/logs/train and {out_dir}/logs/eval. Saving lives in checkpoints/save.py.
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.util.files import write_text_atomic
from tfperf.util.lock import folder_lock
from tfperf.util.made_dirs import removed_on_failure

STATE_FILE = "checkpoint"  # tf.train.CheckpointManager's state file
FINAL_NAME = "FINAL"
_DATA_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")
_PATHS_RE = re.compile(r'^(all_model_checkpoint_paths|model_checkpoint_path):\s*"(.*)"\s*$')
_STEP_RE = re.compile(r"-(\d+)$")


@dataclass(frozen=True)
class RunDirs:
    out_dir: Path
    checkpoint_dir: Path
    log_dir: Path

    @property
    def train_logs(self) -> Path:
        return self.log_dir / "train"

    @property
    def eval_logs(self) -> Path:
        return self.log_dir / "eval"


def run_dirs(cfg: RunConfig) -> RunDirs:
    """train.out_dir (relative to the run file's folder, like every run-file path)."""
    out = Path(cfg.resolve(cfg.train.out_dir) or cfg.train.out_dir)
    return RunDirs(out, out / "checkpoints", out / "logs")


class OutDirError(UserError):
    """train.out_dir cannot be created or written."""


def hold_out_dir(stack: ExitStack, cfg: RunConfig, dirs: RunDirs) -> None:
    """Takes train.out_dir's folder lock until `stack` closes (another `tfperf train` there
    is refused, naming this process) and makes the run's folders; a folder that cannot be
    written is an OutDirError naming it. If the run then fails, the folders it made are
    removed again while still empty (a failed start leaves nothing behind)."""
    # Entered before the lock, so left after it: the lock file is gone by then.
    stack.enter_context(removed_on_failure(dirs.checkpoint_dir, dirs.log_dir))
    try:
        stack.enter_context(folder_lock(dirs.out_dir, "tfperf train", what="train.out_dir"))
        for folder in (dirs.checkpoint_dir, dirs.log_dir):
            folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # Which existing path is in the way: a file where a folder must be, or no write access.
        blocker = next((p for p in (dirs.out_dir, *dirs.out_dir.parents) if p.exists()), None)
        why = f"{blocker} is a file" if blocker is not None and blocker.is_file() else None
        raise OutDirError(
            f"train.out_dir: making the run's folder {dirs.out_dir} failed: "
            f"{exc.strerror or exc} ({why or exc.filename}); expected a folder this user can "
            f"create and write in; change train.out_dir in {cfg.origin('train.out_dir')} "
            "(or --set train.out_dir=PATH)"
        ) from None


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint prefix and its step (the N of ckpt-N)."""

    step: int
    path: str


def checkpoint_step(path: str) -> int | None:
    m = _STEP_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


def is_complete(prefix: str | Path) -> bool:
    """True when the prefix's .index and all of its data shards are on disk."""
    prefix = Path(prefix)
    index = Path(f"{prefix}.index")
    try:
        if not index.is_file() or index.stat().st_size == 0:
            return False
        shards = [p for p in prefix.parent.iterdir() if p.name.startswith(prefix.name + ".data-")]
    except OSError:
        return False
    matches = [_DATA_RE.search(p.name) for p in shards]
    totals = {int(m.group(2)) for m in matches if m}
    if len(totals) != 1:
        return False
    total = totals.pop()
    present = {int(m.group(1)) for m in matches if m}
    return present >= set(range(total))


def listed_checkpoints(checkpoint_dir: str | Path) -> list[str]:
    """Prefixes listed in the manager's state file, oldest first (absolute paths)."""
    d = Path(checkpoint_dir)
    try:
        text = (d / STATE_FILE).read_text()
    except OSError:
        return []
    all_paths, latest = [], None
    for line in text.splitlines():
        m = _PATHS_RE.match(line.strip())
        if not m:
            continue
        p = m.group(2)
        p = p if Path(p).is_absolute() else str(d / p)
        if m.group(1) == "model_checkpoint_path":
            latest = p
        else:
            all_paths.append(p)
    if latest and latest not in all_paths:
        all_paths.append(latest)
    return all_paths


def ready_checkpoints(checkpoint_dir: str | Path) -> list[CheckpointInfo]:
    """Listed and complete checkpoints, by step; never a half-written one."""
    out = []
    for p in listed_checkpoints(checkpoint_dir):
        step = checkpoint_step(p)
        if step is not None and is_complete(p):
            out.append(CheckpointInfo(step, p))
    return sorted(out, key=lambda c: c.step)


def latest_ready(checkpoint_dir: str | Path) -> CheckpointInfo | None:
    ready = ready_checkpoints(checkpoint_dir)
    return ready[-1] if ready else None


def resolve_prefix(path: str | Path) -> str:
    """A ckpt-N prefix from a prefix, a checkpoints dir or a run dir (newest ready one)."""
    p = Path(path)
    if Path(f"{p}.index").exists():
        if not is_complete(p):
            raise UserError(f"--checkpoint {p}: incomplete (data files missing)")
        return str(p)
    for d in (p / "checkpoints", p):
        latest = latest_ready(d)
        if latest:
            return latest.path
    raise UserError(
        f"--checkpoint {p}: expected a ckpt-N prefix or a folder of checkpoints, "
        "found no finished checkpoint there"
    )


# ---- the FINAL marker ---------------------------------------------------------------------


def write_final(checkpoint_dir: Path, step: int, checkpoint_path: str | None) -> Path:
    """FINAL = {"step": N, "checkpoint": path}, atomically (temp file + rename)."""
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"step": int(step), "checkpoint": checkpoint_path}) + "\n"
    return write_text_atomic(checkpoint_dir / FINAL_NAME, text)


def read_final(checkpoint_dir: str | Path) -> CheckpointInfo | None:
    """The FINAL marker (training ended normally), or None; a torn file counts as absent."""
    d = Path(checkpoint_dir)
    try:
        data = json.loads((d / FINAL_NAME).read_text())
        step = int(data["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path = data.get("checkpoint") or str(d / f"ckpt-{step}")
    if not Path(f"{path}.index").exists() and not Path(path).is_absolute():
        path = str(d / Path(path).name)  # written relative to the trainer's working dir
    return CheckpointInfo(step, str(path))


def clear_final(checkpoint_dir: Path) -> None:
    """A resumed run is not over: the evaluator must keep watching."""
    (Path(checkpoint_dir) / FINAL_NAME).unlink(missing_ok=True)
