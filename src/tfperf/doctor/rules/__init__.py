"""The doctor's rules: each reads the `Evidence` and returns its findings; registry.py runs
them all and ranks what they found."""

from tfperf.doctor.rules.registry import PRIORITY, RULES, run_rules

__all__ = ["PRIORITY", "RULES", "run_rules"]
