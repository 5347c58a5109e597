"""Loading user code named as 'module:function' in run files."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from tfperf.errors import UserError
from tfperf.util.format import quoted


def load_object(spec: str, *, field: str, search_dir: str | None = None) -> Any:
    """Imports 'package.module:attr' or 'path/to/file.py:attr' (a file name may hold dots,
    e.g. doctor --fix's RUN.optimized.py); `field` names the run-file key for error messages.

    `search_dir` (the run file's folder) is put on sys.path so that a module sitting
    beside the run file can be found.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{field}: expected 'module:function', found {quoted(spec)}")
    for extra in (search_dir, str(Path.cwd())):
        if extra and extra not in sys.path:
            sys.path.insert(0, extra)
    try:
        if module_name.endswith(".py"):
            module = _import_file(module_name, search_dir)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"{field}: cannot import module '{module_name}': {exc}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserError(f"{field}: module '{module_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    return obj


def _import_file(name: str, search_dir: str | None) -> Any:
    """The module in file `name` (relative to `search_dir`, else the working directory),
    imported once per resolved path."""
    path = Path(name)
    if not path.is_absolute():
        path = Path(search_dir or Path.cwd()) / path
    path = path.resolve()
    if not path.is_file():
        raise ImportError(f"no such file {path}")
    # One module per file: the same file named twice is the same module.
    key = "_tfperf_file_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:  # not a file Python can import (no .py suffix)
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[key]
        raise
    return module
