"""The shapes of summary.json and doctor.json as the report reads them: every field the
report's tables and charts use, with the type it must have. A file that is valid JSON of
another shape (edited by hand, written by another tool, cut by a full disk) is a UserError
naming the file, the field and what was expected and found, before any chart is drawn.

A spec is a type name ("num", "text", "any"), a dict of fields (a key ending in "?" may be
absent; a function among its values checks the whole dict), a one-element list (a list of
that spec), MapOf(spec) (a mapping of any names to that spec) or Maybe(spec) (that spec or
null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfperf.errors import UserError
from tfperf.util.format import quoted


@dataclass(frozen=True)
class Maybe:
    spec: Any


@dataclass(frozen=True)
class MapOf:
    spec: Any


_RATE = {"examples_per_s": Maybe("num")}
STAGE = {
    "label": "text",
    "examples_per_s?": Maybe("num"),
    "us_per_example?": Maybe("num"),
    "error?": "any",
}
FINDING = {
    "code": "text",
    "title": "any",
    "stage?": "any",
    "evidence": "any",
    "change": "any",
    "expected": "any",
    "expected_speedup?": Maybe("num"),
}
DIAGNOSIS = {
    "verdict": "text",
    "input_bound_fraction": "num",
    "source": "any",
    "model": "any",
    "batch_size": "any",
    "precision": "any",
    "slowest_stage?": "any",
    "pipeline": _RATE,
    "compute_limit": _RATE,
    "training": _RATE,
    "variants?": Maybe(MapOf(Maybe("num"))),
    "variants_shown?": Maybe(MapOf({"label?": "any", "text": "any", "note": "any"})),
    "variants_caption?": "any",
    "stages?": Maybe([STAGE]),
    "findings?": Maybe([FINDING]),
    "notes?": Maybe(["any"]),
}


def _timed(trial: dict[str, Any], where: str) -> tuple[str, str, Any] | None:
    """A trial with a ratio has its paired range too (the tables print all three)."""
    if trial.get("ratio") is None:
        return None
    for name in ("low", "high"):
        if not _is_num(trial.get(name)):
            return (f"{where}.{name}", "a number (the trial has a ratio)", trial.get(name))
    return None


TRIAL = {
    "(check)": _timed,
    "change": "any",
    "kept": "any",
    "reason?": "any",
    "examples_per_s?": Maybe("num"),
    "predicted?": Maybe("num"),
    "ratio?": Maybe("num"),
    "low?": Maybe("num"),
    "high?": Maybe("num"),
    "findings?": Maybe(["text"]),
}
FIX = {
    "before_examples_per_s": Maybe("num"),
    "after_examples_per_s": Maybe("num"),
    "predicted_speedup?": Maybe("num"),
    "check?": Maybe({"ratio": "num", "low": "num", "high": "num", "verdict?": "any"}),
    "written?": Maybe(["any"]),
    "trials?": Maybe([TRIAL]),
}
DOCTOR = {"runfile?": Maybe("text"), "diagnosis?": Maybe(DIAGNOSIS), "fix?": Maybe(FIX)}
SUMMARY = {
    "runfile?": Maybe("text"),
    "steps?": Maybe("num"),
    "start_step?": Maybe("num"),
    "examples_per_sec?": Maybe("num"),
    "examples_per_sec_range?": Maybe(["num"]),
    "examples_per_sec_text?": Maybe("text"),
    "input_bound_fraction?": "num",
    "input_bound_fraction_range?": Maybe(["num"]),
    "input_bound_fraction_text?": Maybe("text"),
    "spread_note?": Maybe("text"),
    "final_loss?": "num",
}

_WORDS = {
    "num": "a number",
    "text": "text",
    dict: "an object {...}",
    list: "a list [...]",
    MapOf: "an object {...}",
}


class ShapeError(UserError):
    """A JSON file tfperf wrote whose content is not of the shape the report reads."""


def _found(value: Any) -> str:
    kind = {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(type(value))
    kind = kind or ("null" if value is None else "a number" if _is_num(value) else "a value")
    return kind if value is None else f"{kind}, {quoted(value, 60)}"


def _is_num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _problem(value: Any, spec: Any, where: str) -> tuple[str, str, Any] | None:
    """(field, expected, found value) of the first field of `value` not of `spec`."""
    if isinstance(spec, Maybe):
        return None if value is None else _problem(value, spec.spec, where)
    if spec == "any":
        return None
    if spec == "num":
        return None if _is_num(value) else (where, _WORDS["num"], value)
    if spec == "text":
        return None if isinstance(value, str) else (where, _WORDS["text"], value)
    if isinstance(spec, list):
        if not isinstance(value, list):
            return (where, _WORDS[list], value)
        for i, item in enumerate(value):
            problem = _problem(item, spec[0], f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(spec, MapOf):
        if not isinstance(value, dict):
            return (where, _WORDS[MapOf], value)
        for name, item in value.items():
            problem = _problem(item, spec.spec, f"{where}.{name}" if where else str(name))
            if problem:
                return problem
        return None
    if not isinstance(value, dict):
        return (where, _WORDS[dict], value)
    for key, sub in spec.items():
        if callable(sub):
            continue
        name = key.rstrip("?")
        field = f"{where}.{name}" if where else name
        if name not in value:
            if key.endswith("?"):
                continue
            return (field, f"a field '{name}'", _Missing())
        problem = _problem(value[name], sub, field)
        if problem:
            return problem
    checks = [sub for sub in spec.values() if callable(sub)]
    for check in checks:
        problem = check(value, where)
        if problem:
            return problem
    return None


class _Missing:
    pass


def check_shape(data: Any, spec: Any, path: Any, writer: str) -> None:
    """ShapeError naming `path`, the first field of `data` the report cannot read, what it
    expected and what it found; `writer` is the command that writes the file."""
    problem = _problem(data, spec, "")
    if problem is None:
        return
    field, expected, value = problem
    found = "nothing (no such field)" if isinstance(value, _Missing) else _found(value)
    at = f"field '{field}'" if field else "the top level"
    raise ShapeError(
        f"{path}: {at}: expected {expected}, found {found}; the report cannot read this "
        f"file (written by `{writer}`): run that command again, or move the file away"
    )
