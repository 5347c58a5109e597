"""The doctor's rule for a shuffle after a costly decode: its buffer holds decoded examples
where, moved before the decode's maps, it would hold what they read (file names, indices,
records): the same examples in the same random orders, in a fraction of the RAM, and no
buffer of decoded examples to fill before the first batch of each epoch. A RAM risk when the
buffer as written outgrows the budget (the move keeps the whole buffer, a cap cuts it);
otherwise RAM advice with no speed gain. Its rewrite is rewrites/shuffle_early.py.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rewrites.shuffle_early import early_site
from tfperf.doctor.rules.registry import Rewrite, rule

SHUFFLE_EARLY = Rewrite(
    "shuffle before the decode",
    "shuffle what the decode reads, then decode: .shuffle(buffer).map(decode) instead of "
    ".map(decode).shuffle(buffer) (the same examples, in orders as random)",
    at="shuffle",
)
MIN_SAVED = 32 * 2**20  # bytes of buffer the move must save to be worth a finding
MIN_RATIO = 4  # a decoded element at least this many times the size of what it was read from


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB" if n >= 2**20 else f"{n / 2**10:,.1f} KiB"


@rule("shuffle_after_decode", "risk", 11, rewrites=(SHUFFLE_EARLY,))
def rule_shuffle_after_decode(ctx: Evidence) -> list[Finding]:
    site = early_site(ctx.graph)
    if site is None:
        return []
    shuffle, first = site
    late = ctx.shuffle_bytes.get(shuffle.index)
    early = ctx.shuffle_early_bytes.get(shuffle.index)
    buf = shuffle.buffer_size
    if late is None or early is None or not buf or buf < 0:
        return []
    saved = buf * (late - early)
    if late < MIN_RATIO * max(early, 1) or saved < MIN_SAVED:
        return []
    over = buf * late > ctx.budget
    maps = ", ".join(s.label for s in ctx.graph.stages if first.index <= s.index < shuffle.index)
    risk = f"; over the RAM budget of {_mib(ctx.budget)}" if over else ""
    return [
        Finding(
            "shuffle_after_decode",
            "shuffle buffer of decoded examples",
            shuffle.label,
            f"{shuffle.label} holds {buf:,} elements of ~{late:,} B after {maps} "
            f"({_mib(buf * late)}{risk}); before {first.label} each would be ~{early:,} B "
            f"({_mib(buf * early)})",
            f"move the shuffle before {first.label}: .shuffle({buf}) on what it reads, then the "
            "map (one element in, one out, no random numbers: the same examples in orders as "
            "random)",
            f"~{_mib(saved)} less RAM, the whole buffer kept"
            + ("" if over else "; the same speed"),
            None,
            "risk" if over else "input",
            shuffle.index,
        )
    ]
