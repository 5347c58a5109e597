"""The doctor's rule for a cache placed after a random augmentation: the cache replays the
first epoch's augmented examples every epoch (the augmentation is frozen). It reads the
graph only; registry.py runs it with the others."""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rewrites.io import random_before_cache


def rule_cache_after_random(ctx: Evidence) -> list[Finding]:
    """A cache after a stage whose content is random (augmentation): a risk to the model's
    accuracy, ranked first, with the reorder as the change (--fix tries it)."""
    found = random_before_cache(ctx.graph)
    if found is None:
        return []
    rand, cache = found
    ops = sorted(op for op in rand.fn_ops if "Random" in op or op.startswith("Rng"))
    return [
        Finding(
            "cache_after_random",
            "cache after a random augmentation: the augmentation is frozen",
            cache.label,
            f"{rand.label} draws random numbers ({', '.join(ops[:4]) or 'a random op'}) and "
            f"{cache.label} comes after it: from the second epoch on the cache replays the "
            "first epoch's augmented examples, so every epoch sees the same augmentation",
            f"move .cache() before {rand.label} (cache().map(augment) instead of "
            "map(augment).cache()), or drop it; cache only the deterministic prefix",
            "a fresh augmentation every epoch (the training the augmentation was written for)",
            None,
            "risk",
            cache.index,
        )
    ]
