"""The one way numbers are written for people: rates and counts with thousands separators,
a few significant digits for small values, and a compact form for narrow columns; and the
one way a message quotes a user's input: cut to about 200 characters, saying how much was
cut."""

from __future__ import annotations

import shlex


def number(value: float | None, *, small_digits: int = 1, missing: str = "-") -> str:
    """12,345 for values >= 100; 12.3 (small_digits decimals) below; `missing` for None."""
    if value is None:
        return missing
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.{small_digits}f}"


def spread(value: float | None, low: float | None, high: float | None, digits: int = 1) -> str:
    """'12.3 (8.0-15.1)': a figure with its interval, as text, --json readers and the HTML
    report all show it; the figure alone when the interval is unknown or a single point."""
    if value is None:
        return "-"
    head = f"{value:.{digits}f}"
    if (
        low is None
        or high is None
        or (round(low, digits) == round(high, digits) == round(value, digits))
    ):
        return head
    sep = " to " if low < 0 or high < 0 else "-"  # "-100.0 to -55.0", not "-100.0--55.0"
    return f"{head} ({low:.{digits}f}{sep}{high:.{digits}f})"


def rate_figure(value: float, span: tuple[float, float] | None = None) -> str:
    """'1,234 (1,100-1,300)': a rate as number() writes it with its slowest and fastest
    (repeats, windows); the figure alone when the span is unknown or prints as one figure."""
    if span is None or number(span[0]) == number(span[1]):
        return number(value)
    return f"{number(value)} ({number(span[0])}-{number(span[1])})"


def percent_figure(value: float, span: tuple[float, float] | None = None) -> str:
    """'8.3% (5.1-10.2%)': a fraction as a percent with its least and most."""
    head = f"{value:.1%}"
    if span is None or f"{span[0]:.1%}" == f"{span[1]:.1%}":
        return head
    return f"{head} ({span[0]:.1%}-{span[1]:.1%})".replace("%-", "-", 1)


def paired_ratio(ratio: float | None, low: float | None, high: float | None) -> str:
    """'1.30x paired (1.10-1.52)': the median of per-pair ratios and their range; '-' when
    not timed. It is not the quotient of two medians shown beside it, so it says paired."""
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x paired ({low:.2f}-{high:.2f})"


# The rates table's note for a what-if timed on its own, not paired with (b) or (c).
WHAT_IF_NOTE = "what-if"


def what_if_label(name: str, of_training: bool = False) -> str:
    """A what-if's row name: the rate it varies, training's or the compute limit's."""
    if name.startswith(("training", "compute")):
        return name
    return f"training with {name}" if of_training else f"compute with {name}"


def what_if_row(name: str, rate: float, shown: dict[str, str] | None) -> tuple[str, str, str]:
    """(label, rate text, note) of one what-if's row in the rates table, as the text and HTML
    reports both write it; `shown` is its entry of the diagnosis' variants_shown (a report
    saved before it carried its label reads as the compute limit's)."""
    shown = shown or {}
    label = shown.get("label", what_if_label(name))
    return label, shown.get("text", number(rate)), shown.get("note", WHAT_IF_NOTE)


def compact(value: float) -> str:
    """415k, 1.2M: short enough for a min-max column in 80 columns."""
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1e3:.0f}k" if abs(value) >= 1e4 else f"{value:,.0f}"


def plural(count: float, word: str, many: str | None = None) -> str:
    """'1 step', '20 steps' ('many' for an irregular plural): the count with its noun."""
    return f"{count:,g} {word if count == 1 else many or word + 's'}"


# How much of a user's input a message quotes: enough to recognise it, never a whole file.
QUOTE_LIMIT = 200


def cut(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` whole up to `limit` characters, else its start and how much was cut:
    'abc... (50,000,000 characters cut)'."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} characters cut)"


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """repr(value) cut to `limit` characters (see `cut`), as messages quote a user's input;
    a long string's repr is made from its start only (a 50 MB cell is not copied)."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value) - limit:,} characters cut)"
    return cut(repr(value), limit)


def shell_command(*words: object) -> str:
    """A command for the user to paste, each word shell-quoted: a path with a space, `<`
    or `;` stays one argument (`tfperf report 'runs/a<b'`)."""
    return " ".join(shlex.quote(str(w)) for w in words)
