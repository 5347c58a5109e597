"""The rates table's what-if rows (diagnosis/what_if_rows.py): each row names the rate it
varies, its rate with the spread, and how it was timed."""

from __future__ import annotations

from tfperf.doctor.diagnosis.what_if_rows import what_if_rows
from tfperf.measure import Measurement, Run, compare
from tfperf.util.format import WHAT_IF_NOTE, what_if_row


def _m(name: str, *rates: float) -> Measurement:
    return Measurement(name, [Run(1.0, 10, r) for r in rates])


def test_a_training_what_if_is_labelled_as_training_and_paired_with_c():
    # "input threads=1" varies training, not the model: its row said "compute with ...".
    compute, training = _m("compute", 1000, 1100, 1200), _m("training", 500, 520, 540)
    threads, xla = _m("input threads=1", 600, 620, 650), _m("xla", 1300, 1310, 1320)
    paired = {"input threads=1": compare(training, threads)}
    variants = {"input threads=1": 620.0, "xla": 1310.0}
    measured = {"input threads=1": threads, "xla": xla}
    rows = what_if_rows(measured, variants, paired, compute, training)
    assert rows["input threads=1"]["label"] == "training with input threads=1"
    assert "of (c)" in rows["input threads=1"]["note"]
    assert rows["xla"]["label"] == "compute with xla" and rows["xla"]["note"] == WHAT_IF_NOTE
    label, _, note = what_if_row("input threads=1", 620.0, rows["input threads=1"])
    assert label == "training with input threads=1" and note.startswith("1.")
