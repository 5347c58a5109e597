"""A checkpoint held while the evaluator uses it: its files hard-linked (copied when links
cannot cross filesystems) into {out_dir}/.eval.tmp-PID/ before it is evaluated, so that the
trainer's checkpoint.keep deleting the original cannot leave best/ without the files.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tfperf.train.checkpoints.folder import is_complete
from tfperf.util.files import temp_name


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # the same inode: no copy, and it outlives the trainer's delete
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copy2(src, dst)


@contextmanager
def held_checkpoint(prefix: str, out_dir: Path) -> Iterator[str]:
    """Yields the prefix of a held copy of checkpoint `prefix`; FileNotFoundError when it
    was deleted (in part) before it could be held (a caller retries, then gives up)."""
    src = Path(prefix)
    tmp = out_dir / temp_name("eval", os.getpid())  # .eval.tmp-PID: stale ones are removed
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for f in src.parent.iterdir():
            if f.name == src.name + ".index" or f.name.startswith(src.name + ".data-"):
                _link_or_copy(f, tmp / f.name)
        if not is_complete(tmp / src.name):
            raise FileNotFoundError(errno.ENOENT, "deleted before it could be held", prefix)
        yield str(tmp / src.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
