"""util/progress: the one progress bar (drawn on its console, notes above it, silent when
disabled)."""

from __future__ import annotations

import io

from rich.console import Console

from tfperf.util.progress import progress_bar


def test_progress_bar_draws_on_its_console_and_notes_lines():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    with progress_bar("convert", total=10, unit="records", console=console) as bar:
        bar.advance(4)
        bar.update(info="shard 1")
        bar.note("a note above the bar")
    text = out.getvalue()
    assert "a note above the bar" in text
    assert "convert" in text and "10/10" not in text  # only 4 were done


def test_a_disabled_bar_draws_nothing_but_can_keep_its_notes():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False)
    with progress_bar("x", total=3, enabled=False, console=console) as bar:
        bar.advance(3)
        bar.note("quiet")
    assert out.getvalue() == "" and not bar.enabled
    with progress_bar("x", enabled=False, console=console, notes_when_disabled=True) as bar:
        bar.note("still said")
    assert "still said" in out.getvalue()


def test_without_a_total_the_bar_counts_in_its_unit():
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    with progress_bar("scan", unit="files", console=console) as bar:
        bar.advance(7)
        bar.advance(0)  # nothing done: no change
    assert "scan" in out.getvalue() and "7 files" in out.getvalue()
