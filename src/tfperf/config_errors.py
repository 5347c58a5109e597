"""A run file's validation errors worded for people: one line per field naming the key,
what was expected and what was found, where the value came from (the run file or the
`--set` item that gave it), and for an unknown key the closest known one. Used by
config.py, which passes its root model in.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ValidationError

from tfperf.util.format import cut, quoted

_UNION_TAGS = {"int", "float", "str", "bool", "none", "list", "dict"}


def _is_union_tag(part: object) -> bool:
    # pydantic adds the union member it tried (e.g. "int", "literal['auto']") to the path
    p = str(part)
    return p in _UNION_TAGS or "[" in p


def _section_at(root: type[BaseModel], loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The run-file section (a model class) at `loc`, e.g. ("train", "checkpoint")."""
    model: Any = root
    for part in loc:
        field = model.model_fields.get(part)
        model = field.annotation if field is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
    return model


def _unknown_key(root: type[BaseModel], loc: tuple[str, ...]) -> str:
    section = _section_at(root, loc[:-1])
    known = [k for k, f in section.model_fields.items() if not f.exclude] if section else []
    close = difflib.get_close_matches(loc[-1], known, n=1)
    guess = f"did you mean '{close[0]}'? " if close else ""
    return f"unknown key ({guess}check the spelling; `tfperf config` lists every key)"


def format_errors(
    err: ValidationError, root: type[BaseModel], origin: str, overrides: dict[str, str]
) -> str:
    """pydantic's errors for a run file whose model is `root`, one line per field: where the
    value came from, the key, what was expected and what was found."""
    lines, seen = [], set()
    for e in err.errors():
        loc = tuple(str(p) for p in e["loc"] if not _is_union_tag(p))
        key = ".".join(loc) or "(top level)"
        if key in seen:
            continue  # pydantic reports each union member; keep one line per field
        seen.add(key)
        msg = _unknown_key(root, loc) if e["type"] == "extra_forbidden" else e["msg"]
        where = given_by(key, overrides) or origin
        lines.append(f"{where}: {cut(key)}: {msg}; found {quoted(e.get('input'))}")
    return "\n".join(lines)


def given_by(key: str, overrides: dict[str, str]) -> str | None:
    """The `--set ITEM` that gave `key`: one that sets the key or a section holding it, or
    one that made the key as a section of its own (an unknown `trian` from trian.max_steps=3)."""
    parts = key.split(".")
    holders = [".".join(parts[:n]) for n in range(len(parts), 0, -1)]
    items = [overrides[k] for k in holders if k in overrides]
    items = items or [item for k, item in overrides.items() if k.startswith(key + ".")][-1:]
    return f"--set {cut(items[0])}" if items else None
