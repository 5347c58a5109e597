"""A damaged checkpoint (flipped bytes, a truncated .index): reading it fails with
TensorFlow's error, which is named as that checkpoint's (never the data's); readers fall
back to the newest older checkpoint that reads, saying so on stderr. The trainer moves
the damaged ones into checkpoints/damaged/ (kept, never deleted) so that nothing lists them.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from rich.console import Console

from tfperf.errors import UserError
from tfperf.train.checkpoints.folder import STATE_FILE
from tfperf.util.files import write_text_atomic

T = TypeVar("T")
DAMAGED_DIR = "damaged"  # checkpoints/damaged/: where the trainer moves them


class DamagedCheckpointError(UserError):
    """No checkpoint of the ones tried could be read."""


def read_error_types() -> tuple[type[BaseException], ...]:
    """What reading a damaged checkpoint raises (TensorFlow's OpError: DataLossError, the
    reader's 'not an sstable', a checksum mismatch, a missing data file)."""
    # TensorFlow is imported on first use so that `tfperf --help` stays fast.
    import tensorflow as tf

    return (tf.errors.OpError,)


def reason(exc: BaseException) -> str:
    """The first line of TensorFlow's message (its op and node details cut)."""
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text.splitlines()[0].split(" [Op:")[0].strip()


def _say(message: str) -> None:
    # Kept whole (paths stay greppable); no markup: TensorFlow's messages hold brackets.
    Console(stderr=True).print(message, highlight=False, soft_wrap=True, markup=False)


def read_newest(
    prefixes: Sequence[str], read: Callable[[str], T], *, purpose: str, fix: str
) -> tuple[str, T, list[tuple[str, str]]]:
    """Reads the newest of `prefixes` (oldest first) with `read`, falling back to older
    ones when one is damaged; returns (prefix read, its result, [(damaged, why)]). Raises
    DamagedCheckpointError naming every one tried when none reads; `purpose` ("resuming",
    "evaluating") and `fix` (what to do then) word its messages."""
    errors = read_error_types()
    damaged: list[tuple[str, str]] = []
    for prefix in reversed(prefixes):
        try:
            result = read(prefix)
        except errors as exc:
            damaged.append((prefix, reason(exc)))
            _say(f"warning: checkpoint {prefix} is damaged ({damaged[-1][1]}); {purpose} skips it")
            continue
        if damaged:
            _say(f"{purpose} from the newest intact checkpoint, {prefix}, instead")
        return prefix, result, damaged
    if len(damaged) == 1:
        what = f"checkpoint {damaged[0][0]} is damaged ({damaged[0][1]})"
    else:
        listed = "; ".join(f"{p}: {why}" for p, why in damaged)
        what = f"all {len(damaged)} checkpoints are damaged ({listed})"
    raise DamagedCheckpointError(f"{purpose}: {what}; {fix}")


def set_aside(checkpoint_dir: Path, damaged: Sequence[str], latest: str) -> Path:
    """Moves the damaged checkpoints' files into checkpoint_dir/damaged/ and makes `latest`
    the newest in the manager's state file, so that neither the trainer's next save nor
    the evaluator sees them again. Only the process holding train.out_dir calls this."""
    import tensorflow as tf
    from google.protobuf import text_format

    aside = checkpoint_dir / DAMAGED_DIR
    aside.mkdir(exist_ok=True)
    gone = {Path(p).name for p in damaged}
    for f in checkpoint_dir.iterdir():
        if f.is_file() and f.name.split(".", 1)[0] in gone:
            shutil.move(str(f), str(aside / f.name))
    state = tf.train.get_checkpoint_state(str(checkpoint_dir))
    if state is not None:  # the manager's state proto, edited and written back as text
        paths = list(state.all_model_checkpoint_paths)
        stamps = list(state.all_model_checkpoint_timestamps)
        keep = [i for i, p in enumerate(paths) if Path(p).name not in gone]
        del state.all_model_checkpoint_paths[:], state.all_model_checkpoint_timestamps[:]
        state.all_model_checkpoint_paths.extend(Path(paths[i]).name for i in keep)
        state.all_model_checkpoint_timestamps.extend(stamps[i] for i in keep if i < len(stamps))
        state.model_checkpoint_path = Path(latest).name
        write_text_atomic(checkpoint_dir / STATE_FILE, text_format.MessageToString(state))
    return aside
