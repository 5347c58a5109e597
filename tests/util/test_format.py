"""util/format: the one number formatter (rates and counts, compact columns, plurals)."""

from __future__ import annotations

from tfperf.util.format import compact, number, plural


def test_number_and_compact():
    assert [number(x) for x in (123456.7, 99.94, 0.05, None)] == ["123,457", "99.9", "0.1", "-"]
    assert number(1.234, small_digits=2) == "1.23"
    assert number(None, missing="n/a") == "n/a"
    assert [compact(x) for x in (415_000, 1_234_567, 9_999, 12)] == ["415k", "1.2M", "9,999", "12"]


def test_plural():
    # The train summary said "1 steps per call".
    assert [plural(n, "step") for n in (1, 20, 1000)] == ["1 step", "20 steps", "1,000 steps"]
    assert plural(2, "batch", "batches") == "2 batches"
