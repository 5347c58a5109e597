"""The `tfperf` command: one module per subcommand in tfperf/cli/, each exposing
`register(app)`. Heavy imports (TensorFlow) happen inside the commands, so --help is fast."""

from __future__ import annotations

import importlib

import typer

from tfperf.cli.common import quiet_tensorflow

# Order shown in --help: the user's path through the data flow.
COMMANDS = [
    "demo",
    "convert",
    "inspect",
    "bench",
    "train",
    "evaluate",
    "doctor",
    "profile",
    "cluster_server",
]

app = typer.Typer(
    name="tfperf",
    help="Make TensorFlow/Keras training fast and show why it is slow.\n\n"
    "convert: raw data -> sharded TFRecord; bench: the input pipeline alone; "
    "train/evaluate: tfperf's loop and its separate evaluator; doctor: find and fix "
    "input bottlenecks; profile: a timeline of real steps.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _name in COMMANDS:
    try:
        _module = importlib.import_module(f"tfperf.cli.{_name}")
    except ModuleNotFoundError as _exc:  # a command not built yet
        if _exc.name != f"tfperf.cli.{_name}":
            raise
        continue
    _module.register(app)


def main() -> None:
    quiet_tensorflow()
    app()


if __name__ == "__main__":
    main()
