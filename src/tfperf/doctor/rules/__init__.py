"""The doctor's rules: each module of this package defines rules on the `Evidence` and
registers them (registry.py: a `Rule` record, with the --fix rewrites that make its change).
Every module here is imported below, so a new rule is one new file (CONTRIBUTING.md).

What names rules elsewhere is derived from the registry here: RULES, PRIORITY (ties in
expected gain), ORDER_CODES (ranked before speed advice), PREDICTED_BY (a --fix candidate's
label -> the findings whose gain it expects) and REWRITES (label -> its `Rewrite`).
"""

from __future__ import annotations

import importlib
import pkgutil

from tfperf.doctor.rules.registry import (
    Rewrite,
    Rule,
    ranked_with_ties,
    register,
    registered,
    rule,
    run_rules,
    tie_factor,
    tie_statement,
)

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def _by_label(rules: tuple[Rule, ...]) -> dict[str, Rewrite]:
    out: dict[str, Rewrite] = {}
    for r in rules:
        for rw in r.rewrites:
            if out.setdefault(rw.label, rw) != rw:
                raise ValueError(f"two rewrites of the doctor are labelled '{rw.label}'")
    return out


RULES: tuple[Rule, ...] = registered()
PRIORITY: tuple[str, ...] = tuple(r.code for r in sorted(RULES, key=lambda r: r.priority))
ORDER_CODES: tuple[str, ...] = tuple(r.code for r in RULES if r.order)
REWRITES: dict[str, Rewrite] = _by_label(RULES)
PREDICTED_BY: dict[str, tuple[str, ...]] = {
    label: tuple(r.code for r in RULES if any(rw.label == label for rw in r.rewrites))
    for label in REWRITES
}

__all__ = [
    "ORDER_CODES",
    "PREDICTED_BY",
    "PRIORITY",
    "REWRITES",
    "RULES",
    "Rewrite",
    "Rule",
    "ranked_with_ties",
    "register",
    "rule",
    "run_rules",
    "tie_factor",
    "tie_statement",
]
