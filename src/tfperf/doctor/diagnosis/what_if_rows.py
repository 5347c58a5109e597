"""What the rates table shows for each what-if: its rate with its spread, and how it was
timed. A paired what-if's rate is the main phase's median times its paired ratios' median
(diagnose._paired), so its span is the same phase's median times their least and most, and
the note gives the ratios themselves; another what-if shows its repeats' min-max."""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import TRAINING_VARIANTS
from tfperf.measure import Comparison, Measurement
from tfperf.util.format import WHAT_IF_NOTE, rate_figure, what_if_label


def what_if_rows(
    measured: dict[str, Measurement],
    variants: dict[str, float],
    paired: dict[str, Comparison],
    compute: Measurement,
    training: Measurement,
) -> dict[str, dict[str, str]]:
    """Each what-if of `variants` -> {"label": the row's name, "text": "rate (min-max)",
    "note": how it was timed:
    "1.27x of (b) (1.13-1.42x)" for one paired with the compute limit (findings.PAIRED_NOTE
    says it in words under the table), else "what-if"}."""
    rows = {}
    for name, rate in variants.items():
        c = paired.get(name)
        of_training = name.startswith(TRAINING_VARIANTS)
        # The row says which rate it varies: "input threads=1" is training's, not the model's.
        label = what_if_label(name, of_training)
        if c is not None:
            # (b) or (c) of the table, timed again beside the what-if in each round
            main, ref = (training, "(c)") if of_training else (compute, "(b)")
            at = main.examples_per_s.median
            text = rate_figure(rate, (at * c.low, at * c.high))
            note = f"{c.ratio:.2f}x of {ref} ({c.low:.2f}-{c.high:.2f}x)"
        else:  # every what-if in `variants` was measured (diagnose builds it from them)
            r = measured[name].examples_per_s
            text, note = rate_figure(rate, (r.min, r.max)), WHAT_IF_NOTE
        rows[name] = {"label": label, "text": text, "note": note}
    return rows
