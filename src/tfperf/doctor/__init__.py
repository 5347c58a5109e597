"""The doctor: measures a training run's input pipeline, model and both together, reads the
pipeline's graph, names what slows it (rules) and applies measured fixes (fixes)."""

from tfperf.doctor.fixes import FixResult, fix_pipeline, same_examples
from tfperf.doctor.lint import DatasetGraph, Stage, read_graph
from tfperf.doctor.rules import Diagnosis, Finding, diagnose

__all__ = ["DatasetGraph", "Diagnosis", "Finding", "FixResult", "Stage", "diagnose",
           "fix_pipeline", "read_graph", "same_examples"]  # fmt: skip
