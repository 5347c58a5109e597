"""util/format: the one number formatter (rates and counts, compact columns, plurals) and
the cut quotes of a user's input."""

from __future__ import annotations

from tfperf.util.format import (
    WHAT_IF_NOTE,
    compact,
    cut,
    number,
    plural,
    quoted,
    shell_command,
    spread,
    what_if_row,
)


def test_number_and_compact():
    assert [number(x) for x in (123456.7, 99.94, 0.05, None)] == ["123,457", "99.9", "0.1", "-"]
    assert number(1.234, small_digits=2) == "1.23"
    assert number(None, missing="n/a") == "n/a"
    assert [compact(x) for x in (415_000, 1_234_567, 9_999, 12)] == ["415k", "1.2M", "9,999", "12"]


def test_plural():
    # The train summary said "1 steps per call".
    assert [plural(n, "step") for n in (1, 20, 1000)] == ["1 step", "20 steps", "1,000 steps"]
    assert plural(2, "batch", "batches") == "2 batches"


def test_quotes_of_user_input_are_cut_saying_how_much():
    assert cut("short") == "short" and quoted("short") == "'short'"
    big = "x" * 50_000_200
    assert cut(big) == "x" * 200 + "... (50,000,000 characters cut)"
    assert quoted(big) == repr("x" * 200) + "... (50,000,000 characters cut)"
    assert quoted(b"y" * 250) == repr(b"y" * 200) + "... (50 characters cut)"
    listed = quoted(list(range(1000)), limit=20)
    assert listed.startswith("[0, 1, 2, 3, 4, 5, 6...") and listed.endswith("characters cut)")
    assert len(listed) < 60


def test_a_command_to_paste_is_shell_quoted():
    # a run folder with '<' in its name became a redirect when pasted
    assert shell_command("tfperf", "report", "runs/a<b") == "tfperf report 'runs/a<b'"
    assert shell_command("tensorboard", "--logdir", "my runs/x;rm") == (
        "tensorboard --logdir 'my runs/x;rm'"
    )
    assert shell_command("tfperf", "train", "run.yaml") == "tfperf train run.yaml"


def test_a_figure_with_its_interval():
    assert spread(12.345, 8.0, 15.06) == "12.3 (8.0-15.1)"
    assert spread(-81.0, -100.0, -55.0) == "-81.0 (-100.0 to -55.0)"
    assert spread(3.0, 3.0, 3.0) == "3.0"  # a single point has no interval to show
    assert spread(3.0, None, None) == "3.0" and spread(None, 1.0, 2.0) == "-"


def test_what_if_row_names_compute_what_ifs_and_keeps_a_paired_note() -> None:
    # A compute what-if is labelled as the compute limit's variant; training_* and compute_*
    # keep their names; an unpaired row reads WHAT_IF_NOTE, a paired one its own note.
    assert what_if_row("xla", 1234.0, None) == ("compute with xla", "1,234", WHAT_IF_NOTE)
    shown = {"text": "1,234 (1,100-1,300)", "note": "1.27x of (b) (1.13-1.42x)"}
    assert what_if_row("training_steps_8", 1234.0, shown) == (
        "training_steps_8",
        "1,234 (1,100-1,300)",
        "1.27x of (b) (1.13-1.42x)",
    )
    assert what_if_row("compute_batch_4x", 9.5, {})[1:] == ("9.5", WHAT_IF_NOTE)
