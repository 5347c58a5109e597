"""What every command shares: the run-file argument, `--set` overrides, `--json`, and
turning a user's mistake into one clear line and exit status 2 (no traceback)."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tfperf.errors import UserError

console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

RunFileArg = Annotated[
    str | None,
    typer.Argument(help="Run file (YAML). Omit to use the defaults.", show_default=False),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a run-file value: --set pipeline.batch_size=256 "
        "(repeatable; the value is read as YAML).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def quiet_tensorflow() -> None:
    """Silences TF's C++ start-up chatter; must run before tensorflow is imported."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def print_error(message: str) -> None:
    # Escaped: messages hold things like "shape [3]" that rich would take for markup;
    # soft-wrapped: a path must stay on one line for people and scripts to find it.
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def user_errors(fn: F) -> F:
    """Prints UserError (and friends) as one line and exits 2; Ctrl-C exits 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (UserError, FileNotFoundError) as exc:
            print_error(str(exc))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def command(app: typer.Typer, name: str, help: str, short_help: str) -> Callable[[F], F]:
    """Registers a command on `app` whose user errors print as one line (see user_errors)."""

    def register(fn: F) -> F:
        app.command(name, help=help, short_help=short_help)(user_errors(fn))
        return fn

    return register


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def load_run(runfile: str | None, overrides: list[str] | None) -> Any:
    from tfperf.config import load_config

    return load_config(runfile, overrides or [])
