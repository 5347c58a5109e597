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


def reader(without_input: Any, iterator: Any, mode: str, where: str) -> Callable[[str], bool]:
    """`read(prefix) -> whether the input was restored`, for read_newest: `without_input` is
    the run's Checkpoint of model, optimizer and step, `iterator` the input iterator a
    checkpoint saves (None when it saves none). An OpError from `read` means real damage;
    `where` names train.restore_input's run file in the `require` error."""

    def read(prefix: str) -> bool:
        # Raises (the checkpoint is damaged) unless model, optimizer and step read.
        without_input.restore(prefix).expect_partial()
        if mode == "skip" or iterator is None:
            return False
        problem = _restore_quietly(iterator, prefix)
        if problem is None:
            return True
        if mode == "require":
            raise OtherInputError(
                f"train.restore_input: require, but {prefix} holds another pipeline's input "
                f"position (the pipeline changed since it was saved: {problem}); set "
                f"train.restore_input: auto in {where} to restore the model, optimizer and "
                "step and start the new pipeline from its beginning, or train the old "
                "pipeline on"
            )
        return False

    return read


def _restore_quietly(iterator: Any, prefix: str) -> str | None:
    """Restores the input iterator alone (a Checkpoint of its own, as the run's names it);
    None when it did, else the first line of TensorFlow's error. A failed restore's
    warnings (values left unrestored, logged when its Checkpoint is collected) are kept off
    stderr: the caller says what happened in one line."""
    import gc

    import tensorflow as tf

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")
    try:
        own = tf.train.Checkpoint(iterator=iterator)
        try:
            own.restore(prefix).expect_partial()
            return None
        except tf.errors.OpError as exc:
            problem = str(getattr(exc, "message", exc)).splitlines()[0].split(" [Op:")[0]
        del own
        gc.collect()  # the failed restore's Checkpoint, and its warnings, go now
        return problem
    finally:
        logger.setLevel(level)


def restarted_note(prefix: str, step: int) -> str:
    """The one line `auto` says when the input starts over."""
    return (
        f"resumed the model, optimizer and step {step} from {prefix}; its input position "
        "belongs to another pipeline (the pipeline changed), so the new pipeline starts from "
        "its beginning (train.restore_input: auto)"
    )
