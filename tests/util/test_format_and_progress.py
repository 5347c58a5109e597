"""The one number formatter and the one progress bar."""

from __future__ import annotations

import io

from rich.console import Console

from tfperf.util.format import compact, number, plural
from tfperf.util.progress import progress_bar


def test_number_and_compact():
    assert [number(x) for x in (123456.7, 99.94, 0.05, None)] == ["123,457", "99.9", "0.1", "-"]
    assert number(1.234, small_digits=2) == "1.23"
    assert [compact(x) for x in (415_000, 1_234_567, 9_999, 12)] == ["415k", "1.2M", "9,999", "12"]


def test_plural():
    # The train summary said "1 steps per call".
    assert [plural(n, "step") for n in (1, 20, 1000)] == ["1 step", "20 steps", "1,000 steps"]
    assert plural(2, "batch", "batches") == "2 batches"


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
