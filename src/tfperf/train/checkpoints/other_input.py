"""A checkpoint whose input iterator belongs to another pipeline (the run file changed its
pipeline, as `--fix` does, and trains on in the same train.out_dir): TensorFlow refuses to
restore that iterator, which is no damage. `train.restore_input` decides: `auto` restores
the model, optimizer and step and starts the new pipeline from its beginning, `require`
stops with a clear error, `skip` never restores the input. A checkpoint that does not read
without its iterator either is damaged (checkpoints/damaged.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tfperf.errors import UserError

RESTORE_INPUT = ("auto", "require", "skip")


class OtherInputError(UserError):
    """train.restore_input: require, and the checkpoint's iterator is another pipeline's."""


def reader(full: Any, without_input: Any, mode: str, where: str) -> Callable[[str], bool]:
    """`read(prefix) -> whether the input was restored`, for read_newest: `full` is the
    run's Checkpoint (with the iterator, when saved), `without_input` the same objects
    without it. An OpError from `read` means real damage; `where` names train.restore_input's
    run file in the `require` error."""
    errors = _op_errors()

    def read(prefix: str) -> bool:
        if mode == "skip" or full is without_input:
            without_input.restore(prefix).expect_partial()
            return False
        try:
            full.restore(prefix).expect_partial()
            return True
        except errors as exc:
            first = str(getattr(exc, "message", exc)).splitlines()[0].split(" [Op:")[0]
            # Raises (the checkpoint is damaged) unless all but the iterator reads.
            without_input.restore(prefix).expect_partial()
            if mode == "require":
                raise OtherInputError(
                    f"train.restore_input: require, but {prefix} holds another pipeline's "
                    f"input position (the pipeline changed since it was saved: {first}); set "
                    f"train.restore_input: auto in {where} to restore the model, optimizer and "
                    "step and start the new pipeline from its beginning, or train the old "
                    "pipeline on"
                ) from None
            return False

    return read


def _op_errors() -> tuple[type[BaseException], ...]:
    import tensorflow as tf  # imported on first use so that `tfperf --help` stays fast

    return (tf.errors.OpError,)


def restarted_note(prefix: str, step: int) -> str:
    """The one line `auto` says when the input starts over."""
    return (
        f"resumed the model, optimizer and step {step} from {prefix}; its input position "
        "belongs to another pipeline (the pipeline changed), so the new pipeline starts from "
        "its beginning (train.restore_input: auto)"
    )
