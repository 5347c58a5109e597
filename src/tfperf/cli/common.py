"""What every command shares: the run-file argument, `--set` overrides, `--json`, the
report console on stdout, TensorFlow kept quiet unless --verbose, and a user's mistake
turned into one clear paragraph and exit status 2 (no traceback)."""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TextIO, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tfperf.errors import UserError
from tfperf.util.startup import lean_tensorflow_import

console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")

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


# A report redirected or piped (no terminal to fit) is laid out for this many columns,
# unless COLUMNS says otherwise: tables wrap their cells, never a line per row of
# thousands of characters (rich would otherwise size a table to its longest cell).
REPORT_WIDTH = 100


# The real stdout of the running command(s): while a command runs, what anything else
# prints to stdout (the user's pipeline or model code, Keras' "Found N files") goes to
# stderr, so that a report or --json on stdout stays whole.
_reports: list[TextIO] = []


def report_stream() -> TextIO:
    """Where the running command's report goes: its stdout."""
    return _reports[-1] if _reports else sys.stdout


@contextmanager
def others_print_to_stderr() -> Iterator[None]:
    """Runs a command with sys.stdout sent to stderr, its report kept on report_stream()."""
    _reports.append(report_stream())
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _reports.pop()


def report_width() -> int | None:
    """The report's width: None (fit the window) on a terminal; redirected or piped,
    COLUMNS when set, else REPORT_WIDTH."""
    if report_stream().isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else REPORT_WIDTH


def stdout_console() -> Console:
    """The console of a command's report, on stdout (progress and logs go to stderr): on a
    terminal it fits the window; redirected or piped (`> file`, `| less`) tables are laid
    out for report_width() columns, their cells wrapped. Lines of text are never wrapped
    (soft_wrap), so a path printed on its own line stays whole there."""
    return Console(file=report_stream(), width=report_width(), soft_wrap=True)


# TensorFlow's (and xprof's) start-up lines: C++ writes them straight to file descriptor 2,
# before and regardless of Python's logging. Anything else written there is kept.
STARTUP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\)|cpu_feature_guard\.cc|"
    r"^To enable the following instructions:|oneDNN custom operations are on|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|computation placer already registered|"
    r"TF-TRT Warning: Could not find TensorRT|No UnifiedProfileProcessor"
)


_verbose = False  # --verbose given: TensorFlow's lines are all shown


@contextmanager
def tensorflow_startup_filtered() -> Iterator[None]:
    """Runs the body with file descriptor 2 captured, then writes back every captured line
    except TensorFlow's start-up noise (STARTUP_NOISE); with --verbose, captures nothing."""
    if _verbose:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    # A file, not a pipe: a full pipe would block the writer with nobody reading.
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            lines = captured.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not STARTUP_NOISE.search(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Imports tensorflow, the first time anything does, inside tensorflow_startup_filtered
    (a no-op under --verbose) and without the garbage collector's passes."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once; and the lookup below must not find this finder
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _FilteredLoader(spec.loader)
        return spec


class _FilteredLoader(importlib.abc.Loader):
    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = module.__loader__ = self._loader  # the real one from now on
        with tensorflow_startup_filtered(), lean_tensorflow_import():
            self._loader.exec_module(module)


def quiet_tensorflow(verbose: bool = False) -> None:
    """TensorFlow's start-up lines and C++ logs below errors stay hidden (log level 2, unless
    the environment sets one, and the start-up lines filtered out of `import tensorflow`);
    `verbose` shows them all. Must run before tensorflow is imported."""
    global _verbose
    _verbose = verbose
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    else:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    hooks = [f for f in sys.meta_path if isinstance(f, _QuietTensorFlowImport)]
    if "tensorflow" not in sys.modules and not hooks:
        sys.meta_path.insert(0, _QuietTensorFlowImport())


def tensorflow_backend() -> None:
    """Keras on its TensorFlow backend for this process: tfperf's commands train with
    TensorFlow's distribution strategies and tf.function steps. A KERAS_BACKEND (or
    keras.json) that asks for another backend is said in one line on stderr. Must run
    before keras is imported (the backend is fixed then)."""
    asked = os.environ.get("KERAS_BACKEND") or _keras_json_backend()
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "tensorflow"
    if asked and asked != "tensorflow":
        print(
            f"tfperf: Keras backend {asked!r} asked for (KERAS_BACKEND or keras.json); tfperf's "
            "commands run Keras on TensorFlow (from Python, tfperf.optimize and "
            "tfperf.keras.InputMonitor work on any backend)",
            file=sys.stderr,
        )


def _keras_json_backend() -> str | None:
    """The backend ~/.keras/keras.json (or $KERAS_HOME's) names, if any."""
    home = Path(os.environ.get("KERAS_HOME") or Path.home() / ".keras")
    try:
        value = json.loads((home / "keras.json").read_text()).get("backend")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def print_error(message: str) -> None:
    # Escaped: messages hold things like "shape [3]" that rich would take for markup;
    # soft-wrapped: a path must stay on one line for people and scripts to find it.
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def user_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Prints UserError (and friends) as one line and exits 2; Ctrl-C exits 130."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with others_print_to_stderr():
                return fn(*args, **kwargs)
        except (UserError, FileNotFoundError) as exc:
            print_error(str(exc))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None

    return wrapper


def command(app: typer.Typer, name: str, help: str, short_help: str) -> Callable[[F], F]:
    """Registers a command on `app` whose user errors print as one line (see user_errors)."""

    def register(fn: F) -> F:
        app.command(name, help=help, short_help=short_help)(user_errors(fn))
        return fn

    return register


def print_json(data: Any) -> None:
    out = report_stream()
    out.write(json.dumps(data, indent=2, default=str) + "\n")
    out.flush()


def load_run(runfile: str | None, overrides: list[str] | None) -> Any:
    from tfperf.config import load_config

    return load_config(runfile, overrides or [])
