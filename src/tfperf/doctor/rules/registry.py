"""The doctor's judgement: every rule run on the `Evidence` (evidence.py) and the findings
ranked. The rules live by subject: rules_pipeline.py (the stages' costs), rules_model.py
(batch, precision, XLA, resume, scale out), rules_cache.py (a cache after a random augmentation),
rules_arrays.py (large arrays in the graph), rules_ram.py (a shuffle buffer over the RAM
budget), rules_order.py (shuffle and repeat in the wrong order). Ranking: RAM risks first,
then a wrong stage order, then by expected speedup, ties broken by PRIORITY.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rules.arrays import rule_large_array
from tfperf.doctor.rules.cache import rule_cache_after_random
from tfperf.doctor.rules.model import (
    rule_input_not_checkpointable,
    rule_precision,
    rule_scale_out,
    rule_small_batch,
    rule_xla,
)
from tfperf.doctor.rules.order import (
    ORDER_CODES,
    rule_repeat_before_shuffle,
    rule_shuffle_after_batch,
)
from tfperf.doctor.rules.ram import rule_shuffle_budget
from tfperf.doctor.rules.stage_cost import (
    rule_deterministic,
    rule_float64,
    rule_from_generator,
    rule_no_cache,
    rule_no_interleave,
    rule_no_prefetch,
    rule_per_example_map,
    rule_per_example_parse,
    rule_py_function,
    rule_sequential_map,
)
from tfperf.observe.feed import MODERATELY

# Ties in expected gain are broken by this order (the more specific cause first).
PRIORITY = (
    "shuffle_over_budget",
    "cache_after_random",
    "shuffle_after_batch",
    "repeat_before_shuffle",
    "from_generator",
    "py_function",
    "per_example_parse",
    "per_example_map",
    "no_interleave",
    "sequential_map",
    "no_cache",
    "no_prefetch",
    "deterministic",
    "float64",
    "xla",
    "precision",
    "small_batch",
    "scale_out",
    "large_array",
)


RULES = (
    rule_cache_after_random,
    rule_shuffle_after_batch,
    rule_repeat_before_shuffle,
    rule_scale_out,
    rule_input_not_checkpointable,
    rule_shuffle_budget,
    rule_py_function,
    rule_from_generator,
    rule_per_example_parse,
    rule_per_example_map,
    rule_sequential_map,
    rule_no_interleave,
    rule_no_cache,
    rule_no_prefetch,
    rule_deterministic,
    rule_float64,
    rule_small_batch,
    rule_precision,
    rule_xla,
    rule_large_array,
)


def run_rules(ctx: Evidence) -> list[Finding]:
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(ctx))
    order = {c: i for i, c in enumerate(PRIORITY)}

    # While the input is the limit, compute changes cannot show their gain: input first.
    input_bound = ctx.input_bound_fraction >= MODERATELY

    def key(f: Finding) -> tuple:
        later = (f.kind == "compute") == input_bound
        # More hosts are the last resort: after every change that makes this host's input
        # cheaper, whatever gain each promises.
        last_resort = f.code == "scale_out"
        # A wrong stage order changes what the model learns from: it comes right after the
        # RAM risks (which can stop the run) and before any speed advice, since a faster
        # pipeline that feeds the same batches every epoch is still wrong, and moving the
        # shuffle changes what its buffer holds, so speed is better judged after the move.
        wrong_order = f.code in ORDER_CODES
        gain = -(f.expected_speedup or 0.0)
        return (f.kind != "risk", not wrong_order, later, last_resort, gain, order.get(f.code, 99))

    return sorted(found, key=key)
