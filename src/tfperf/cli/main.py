"""The `tfperf` command: one module per subcommand in tfperf/cli/, each exposing
`register(app)`, the global --verbose option, and help texts that flow with the terminal.
Heavy imports (TensorFlow) happen inside the commands, so --help is fast."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from tfperf.cli.common import quiet_tensorflow, tensorflow_backend

# Order shown in --help: the user's path through the data flow.
COMMANDS = [
    "demo",
    "convert",
    "inspect",
    "export_tfds",
    "bench",
    "train",
    "evaluate",
    "doctor",
    "report",
    "profile",
    "cluster_server",
    "config",
    "data_service",  # a group of commands: typer lists groups after the plain commands
]


def reflow(text: str) -> str:
    """Help text whose paragraphs flow with the terminal instead of keeping the source's
    line breaks. In a paragraph, a line continues the text above it unless it is indented
    (an item of a list or table: its own line), and a line indented deeper than the item
    above continues that item. Click's \\b markers mean nothing to rich and go."""
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(text.replace("\b", "")))
    return "\n\n".join(_flow(p) for p in paragraphs if p.strip())


def _flow(paragraph: str) -> str:
    items: list[list[Any]] = []  # [indent, text]
    for line in paragraph.splitlines():
        indent = len(line) - len(line.lstrip())
        last = items[-1] if items else None
        if last is not None and (indent == last[0] == 0 or 0 < last[0] < indent):
            last[1] += " " + line.strip()
        else:
            items.append([indent, line.rstrip()])
    return "\n".join(text for _, text in items)


def _first_sentence(text: str) -> str:
    first = text.split("\n\n")[0]
    return re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]


def polish_help(cmd: TyperCommand | TyperGroup) -> None:
    """Reflows `cmd`'s help and escapes rich markup in every help text of `cmd`, its
    options and its subcommands: brackets and braces show as written."""
    if cmd.short_help or cmd.help:
        # The command list shows one line per command: the short help, else the first sentence.
        cmd.short_help = escape(cmd.short_help or _first_sentence(reflow(cmd.help or "")))
    if cmd.help:
        cmd.help = escape(reflow(cmd.help))
    for param in cmd.params:
        if isinstance(param, TyperOption | TyperArgument) and param.help:
            param.help = escape(param.help)
    for sub in getattr(cmd, "commands", {}).values():
        polish_help(sub)


class HelpGroup(TyperGroup):
    """The command group, its help texts polished once when typer builds it."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        polish_help(self)


app = typer.Typer(
    name="tfperf",
    cls=HelpGroup,
    help="Make TensorFlow/Keras training fast and show why it is slow.\n\n"
    "convert: raw data -> sharded TFRecord; bench: the input pipeline alone; "
    "train/evaluate: tfperf's loop and its separate evaluator; doctor: find and fix "
    "input bottlenecks; profile: a timeline of real steps; config: every run-file key.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def global_options(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            envvar="TFPERF_VERBOSE",
            help="Show TensorFlow's start-up lines and C++ logs (hidden by default).",
        ),
    ] = False,
) -> None:
    quiet_tensorflow(verbose)
    tensorflow_backend()


for _name in COMMANDS:
    try:
        _module = importlib.import_module(f"tfperf.cli.{_name}")
    except ModuleNotFoundError as _exc:  # a command not built yet
        if _exc.name != f"tfperf.cli.{_name}":
            raise
        continue
    _module.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
