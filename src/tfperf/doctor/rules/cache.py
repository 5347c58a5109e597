"""The rules about caching: expensive deterministic work repeated every epoch (no cache), and a
cache placed after a random augmentation, which replays the first epoch's augmented examples
every epoch (the augmentation is frozen; a risk to the model's accuracy, ranked first). They
read the `Evidence`; registry.py runs them with the others.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rewrites.cache import early_caches, source_shuffle
from tfperf.doctor.rewrites.io import random_before_cache
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.doctor.rules.stage_cost import MIN_CACHE_SHARE, WORK_KINDS, fixed_share
from tfperf.util.format import number

_CACHE_EDIT = (
    "add .cache() after the last deterministic stage (before shuffle, repeat and random "
    "augmentation); a source shuffled first (list_files shuffles by default) is shuffled "
    "after the cache instead: list_files(..., shuffle=False), then "
    ".map(...).cache().shuffle(number of elements)"
)
CACHE_PREFIX = Rewrite("cache the deterministic prefix", _CACHE_EDIT, at="cache")
CACHE_RECORDS = Rewrite("cache records")  # the run file's pipeline.cache_records
CACHE_PREPROCESSED = Rewrite("cache preprocessed")  # pipeline.cache_preprocessed
# Its code edit is the cache's as --fix has always worded it (cache before the augmentation).
MOVE_CACHE = Rewrite("move the cache before the random augmentation", _CACHE_EDIT, at="cache")


@rule("cache_after_random", "risk", 20, rewrites=(MOVE_CACHE,))
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


@rule("no_cache", "input", 110, rewrites=(CACHE_PREFIX, CACHE_RECORDS, CACHE_PREPROCESSED))
def rule_no_cache(ctx: Evidence) -> list[Finding]:
    early = early_caches(ctx.graph)  # a cache of records before their parse: it moves
    caches = {s.index for s in ctx.graph.stages if s.kind == "cache"}
    if ctx.cache_candidate is None or not caches <= {s.index for s in early}:
        return []
    last, n, size = ctx.cache_candidate
    # What the early cache already saves is not counted again.
    after = early[-1].index if early else -1
    prefix = [s for s in ctx.graph.stages if after < s.index <= last.index]
    if size > ctx.cache_budget or not any(s.kind in WORK_KINDS for s in prefix):
        return []
    # Count only what the stage's own, more specific fix would leave.
    cost = sum(ctx.stage_cost(s.index) * (1.0 - fixed_share(ctx, s)) for s in prefix)
    nxt = next((s for s in ctx.graph.stages if s.index > last.index), None)
    if nxt is not None and nxt.kind == "unbatch":
        # Elements that are not yet examples (a clip's frames) have no cost per example: the
        # unbatch's prefix difference carries the work before it.
        cost += ctx.stage_cost(nxt.index)
    if cost * ctx.pipeline < MIN_CACHE_SHARE:
        return []
    new_p = ctx.pipeline_without(cost)
    gain = ctx.speedup_pipeline(new_p, ctx.cpu_of(cost))
    return [
        Finding(
            "no_cache",
            "expensive deterministic work repeated every epoch",
            last.label,
            f"stages up to {last.label} are deterministic and cost {cost * 1e6:.1f} us per example "
            f"(~{min(cost * ctx.pipeline, 1):.0%} of the pipeline); their {n:,} "
            f"elements take ~{size / 2**20:,.1f} MiB (budget {ctx.cache_budget / 2**20:,.0f} MiB)",
            (
                f"move .cache() from {early[-1].label}, where it holds what the work reads, "
                f"to after {last.label}"
                if early
                else f"add .cache() after {last.label}"
            )
            + " (before any shuffle or random augmentation; run file: "
            "pipeline.cache_preprocessed: true)"
            + (
                f"; {moved.label} shuffles the source: shuffle after the cache instead "
                "(e.g. list_files(..., shuffle=False), then .cache().shuffle(number of elements))"
                if (moved := source_shuffle(ctx.graph)) is not None
                else ""
            ),
            f"epochs after the first: pipeline ~{number(new_p)} ex/s; training ~{gain:.1f}x faster",
            gain,
            "input",
            last.index,
            saves_wall=cost,
            saves_cpu=ctx.cpu_of(cost),
        )
    ]
