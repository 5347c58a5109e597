"""The source of the user's `data.pipeline: module:function`, read with `inspect`: its file,
lines and first line number, and the line where a call is written, so that a finding or a
kept rewrite names the file and line to edit. Nothing here runs the function."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path

from tfperf.config import RunConfig
from tfperf.errors import UserError
from tfperf.util.imports import load_object


@dataclass
class UserSource:
    """The user's pipeline function as written: its file, source lines and first line."""

    file: str
    lines: list[str]  # as inspect gives them, each ending with its newline
    start: int  # the line number of lines[0]

    def find(self, call: str, *, after: str | None = None, before: str | None = None) -> int | None:
        """The line number of the first `call` (e.g. ".shuffle(") written after the first
        `after` and before the last `before` (comments left out; None: not found)."""
        # One string, so that a chain on one line (ds.repeat(3).shuffle(64)) keeps its order.
        text = "".join(line.split("#")[0].rstrip() + "\n" for line in self.lines)
        lo = text.find(after) if after else 0
        hi = text.rfind(before) if before else len(text)
        at = text.find(call, max(lo, 0), max(hi, 0))
        if lo < 0 or at < 0:
            return None
        return self.start + text.count("\n", 0, at)

    def where(self, call: str, **order: str) -> str | None:
        """'file:line: `code`' of `find(call, **order)`, for a finding's change."""
        line = self.find(call, **order)
        if line is None:
            return None
        return f"{self.file}:{line}: `{self.lines[line - self.start].strip()}`"


def user_source(cfg: RunConfig) -> UserSource | None:
    """The run file's data.pipeline function's source (None: no such function, or inspect
    cannot read it, e.g. a function defined in a notebook cell or a C extension)."""
    pipeline = cfg.data.pipeline
    if not pipeline:
        return None
    home = str(Path(cfg.source).parent) if cfg.source else None
    try:
        fn = load_object(pipeline, field="data.pipeline", search_dir=home)
        lines, start = inspect.getsourcelines(fn)
        file = inspect.getsourcefile(fn) or "?"
    except (UserError, TypeError, OSError):
        return None
    return UserSource(file, lines, start)
