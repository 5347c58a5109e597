"""`tfperf config`: every run-file key with its type, default and meaning, read from the run
file's pydantic models in tfperf/config.py (so the list is what validation accepts), and
`--show RUNFILE`: the run file as tfperf resolves it, every default spelled out."""

from __future__ import annotations

import difflib
import json
import types
import typing
from typing import Annotated, Any

import typer
from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from tfperf.cli.common import (
    JsonOpt,
    SetOpt,
    command,
    load_run,
    print_json,
    report_stream,
    stdout_console,
)
from tfperf.config import RunConfig, dump_config
from tfperf.errors import UserError
from tfperf.util.format import cut, quoted

HELP = """List every key a run file may hold: its dotted path (as --set takes it), its type,
its default and what it means. Generated from the models that validate run files, so it
is always complete and current.

PREFIX narrows the list to a section or key (`tfperf config train`, `tfperf config
pipeline.batch_size`).

--show RUNFILE prints the run file as tfperf resolves it (YAML, every default spelled out,
--set overrides applied); with --json, the same as JSON.

--json prints a list of {key, type, default, description}; default is null for none."""


def type_name(annotation: Any) -> str:
    """A field's type as a run file spells it: int | auto, list[str], str | null, ..."""
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is list:
        return f"list[{type_name(args[0])}]"
    if origin is dict:
        return "mapping"
    return getattr(annotation, "__name__", str(annotation))


def key_rows(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[dict[str, Any]]:
    """{key, type, default, description} of every run-file key, in the models' order."""
    rows: list[dict[str, Any]] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue  # not a run-file key (the file's own path)
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            rows += key_rows(kind, f"{prefix}{name}.")
            continue
        default = field.get_default(call_default_factory=True)
        rows.append(
            {
                "key": prefix + name,
                "type": type_name(kind),
                "default": default,
                "description": field.description or "",
            }
        )
    return rows


def _matching(rows: list[dict[str, Any]], prefix: str | None) -> list[dict[str, Any]]:
    if not prefix:
        return rows
    found = [r for r in rows if r["key"] == prefix or r["key"].startswith(prefix + ".")]
    if found:
        return found
    names = sorted({part for r in rows for part in (r["key"].split(".")[0], r["key"])})
    close = difflib.get_close_matches(prefix, names, n=1)
    guess = f" (did you mean '{close[0]}'?)" if close else ""
    raise UserError(
        f"tfperf config {cut(prefix)}: no run-file key or section is called "
        f"{quoted(prefix)}{guess}; "
        "`tfperf config` lists them all"
    )


def _shown(value: Any) -> str:
    """A default as a run file writes it: null, true, auto, [precision, batch], {}."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return json.dumps(value)


def _print_table(rows: list[dict[str, Any]]) -> None:
    table = Table(box=None, pad_edge=False)
    # The key stays whole (it is what --set takes); a long type or default wraps in its
    # cell, and the meaning takes the width left.
    table.add_column("key", no_wrap=True)
    table.add_column("type", max_width=16, overflow="fold")
    table.add_column("default", max_width=12, overflow="fold")
    table.add_column("meaning", ratio=1, overflow="fold")
    for r in rows:
        table.add_row(
            *(Text(t) for t in (r["key"], r["type"], _shown(r["default"]))), Text(r["description"])
        )
    stdout_console().print(table)


def register(app: typer.Typer) -> None:
    @command(app, "config", HELP, "List every run-file key (type, default, meaning); --show one.")
    def config_cmd(
        prefix: Annotated[
            str | None,
            typer.Argument(
                help="Only keys of this section or key, e.g. train.", show_default=False
            ),
        ] = None,
        show: Annotated[
            str | None,
            typer.Option(
                "--show",
                metavar="RUNFILE",
                help="Print this run file resolved (YAML): defaults filled in, --set applied.",
                show_default=False,
            ),
        ] = None,
        set_: SetOpt = None,
        json_out: JsonOpt = False,
    ) -> None:
        if show is None:
            if set_:
                raise UserError("--set: only with --show RUNFILE (the run file it changes)")
            rows = _matching(key_rows(), prefix)
            if json_out:
                print_json(rows)
            else:
                _print_table(rows)
            return
        cfg = load_run(show, set_)
        if json_out:
            print_json(cfg.model_dump(mode="json", exclude={"source"}))
        else:
            report_stream().write(dump_config(cfg))
