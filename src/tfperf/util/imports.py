"""Loading user code named as 'module:function' in run files."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from tfperf.errors import UserError


def load_object(spec: str, *, field: str, search_dir: str | None = None) -> Any:
    """Imports 'package.module:attr'; `field` names the run-file key for error messages.

    `search_dir` (the run file's folder) is put on sys.path so that a module sitting
    beside the run file can be found.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{field}: expected 'module:function', found {spec!r}")
    for extra in (search_dir, str(Path.cwd())):
        if extra and extra not in sys.path:
            sys.path.insert(0, extra)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"{field}: cannot import module '{module_name}': {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{field}: module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj
