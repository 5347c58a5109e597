"""Calling the user's own functions named in a run file (data.pipeline, model.name): an
exception they raise becomes one paragraph naming the run-file key, the function, the
error and the line of the user's file it came from, instead of a traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfperf.errors import UserError


class UserCodeError(UserError):
    """A function named in the run file raised."""


def _is_library(filename: str) -> bool:
    # Frames of tfperf, TensorFlow, Keras and the standard library are not the user's.
    path = Path(filename)
    if "site-packages" in path.parts or "dist-packages" in path.parts:
        return True
    tfperf_root = Path(__file__).resolve().parents[1]
    if tfperf_root in path.resolve().parents:
        return True
    return str(path).startswith(sys.base_prefix) or filename.startswith("<")


def user_frame(exc: BaseException) -> str | None:
    """'file.py, line N, in function' of the innermost frame of the user's own code."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_library(f.filename)]
    if not frames:
        return None
    f = frames[-1]
    return f"{f.filename}, line {f.lineno}, in {f.name}"


def describe_failure(exc: BaseException) -> str:
    """'ValueError: the message's first line (at file.py, line N, in fn)'."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    where = user_frame(exc)
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return f"{text} (at {where})" if where else text


def call_user(
    fn: Callable[..., Any], field: str, spec: str, doing: str, source: str | None, **kwargs: Any
) -> Any:
    """fn(**kwargs); an exception it raises becomes a UserCodeError saying that `doing`,
    the function `spec` named by `field` raised, where, and where to change it."""
    try:
        return fn(**kwargs)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any error of the user's code is reported
        raise UserCodeError(
            f"{field}: {doing}, {spec} raised {describe_failure(exc)}; fix that function, or "
            f"point {field} at another one in {source or 'the run file'}"
        ) from None
