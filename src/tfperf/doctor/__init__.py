"""The doctor: measures a training run's input pipeline, model and both together
(diagnose), reads the pipeline's graph (lint), names what slows it (rules) and applies
measured fixes (fixes, rewrites, runfile); report renders it all."""

from tfperf.doctor.diagnose import diagnose
from tfperf.doctor.findings import Diagnosis, Finding
from tfperf.doctor.fix_trials import FixResult, FixTrial
from tfperf.doctor.fixes import fix_pipeline
from tfperf.doctor.graph_read import DatasetGraph, GraphStage, read_graph
from tfperf.doctor.rewrites import same_examples

__all__ = [
    "DatasetGraph",
    "Diagnosis",
    "Finding",
    "FixResult",
    "FixTrial",
    "GraphStage",
    "diagnose",
    "fix_pipeline",
    "read_graph",
    "same_examples",
]
