"""The one progress display of every long command: a rich bar (or a spinner when the total
is unknown) on stderr, so reports on stdout stay clean, and nothing at all when disabled.

    with progress_bar("convert", total=n, unit="records", enabled=show) as bar:
        bar.advance(k)
        bar.update(description="shard 3", info="loss 0.1")
        bar.note("a line above the bar")
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ProgressBar:
    """A handle on one running bar; every method is a no-op when the bar is disabled."""

    def __init__(self, progress: Any = None, task: Any = None, console: Any = None):
        self._progress, self._task, self._console = progress, task, console

    @property
    def enabled(self) -> bool:
        return self._progress is not None

    def advance(self, n: float = 1) -> None:
        if self._progress is not None and n:
            self._progress.advance(self._task, n)

    def update(self, **fields: Any) -> None:
        """Sets `completed`, `total`, `description` or `info` (the text after the bar)."""
        if self._progress is None:
            return
        known = {k: fields.pop(k) for k in ("completed", "total", "description") if k in fields}
        self._progress.update(self._task, **known, **fields)

    def note(self, text: str) -> None:
        """Prints a line above the bar (on stderr), also when the bar is disabled but a
        console was given."""
        if self._console is not None:
            self._console.print(text)


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def progress_bar(
    description: str,
    *,
    total: float | None = None,
    completed: int = 0,
    unit: str | None = None,
    enabled: bool = True,
    transient: bool = False,
    console: Any = None,
    notes_when_disabled: bool = False,
) -> Iterator[ProgressBar]:
    """A bar over `total` (a spinner with a count when None) showing `unit`/s and an `info`
    text; `transient` clears it when done. Notes still print when disabled only with
    `notes_when_disabled` (messages a quiet run must still show)."""
    if not enabled:
        yield ProgressBar(console=(console or stderr_console()) if notes_when_disabled else None)
        return
    from rich import progress as rp

    console = console or stderr_console()
    columns: list[Any] = [rp.SpinnerColumn()] if total is None else []
    columns.append(rp.TextColumn("{task.description}"))
    if total is None:
        columns.append(rp.TextColumn("{task.completed:,.0f}" + (f" {unit}" if unit else "")))
    else:
        columns += [rp.BarColumn(), rp.MofNCompleteColumn()]
        if unit:
            columns.append(rp.TextColumn("{task.fields[rate]}"))
    columns += [rp.TextColumn("{task.fields[info]}"), rp.TimeElapsedColumn()]
    if total is not None:
        columns.append(rp.TimeRemainingColumn())
    progress = rp.Progress(*columns, console=console, transient=transient)
    task = progress.add_task(description, total=total, completed=completed, info="", rate="")
    bar = (
        _RateBar(progress, task, console, unit)
        if unit and total is not None
        else ProgressBar(progress, task, console)
    )
    with progress:
        yield bar


class _RateBar(ProgressBar):
    """A bar that also shows its measured rate in `unit`/s."""

    def __init__(self, progress: Any, task: Any, console: Any, unit: str):
        super().__init__(progress, task, console)
        self._unit = unit

    def advance(self, n: float = 1) -> None:
        super().advance(n)
        speed = self._progress.tasks[0].speed if self._progress is not None else None
        if speed:
            self._progress.update(self._task, rate=f"{speed:,.0f} {self._unit}/s")
