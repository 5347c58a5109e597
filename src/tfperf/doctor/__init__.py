"""The doctor: measures a training run's input pipeline, model and both together
(diagnose), reads the pipeline's graph (lint), names what slows it (rules) and applies
measured fixes (fixes, rewrites, runfile); report renders it all."""

from tfperf.doctor.diagnosis.diagnose import diagnose
from tfperf.doctor.evidence.findings import Diagnosis, Finding
from tfperf.doctor.fix.entry import fix_pipeline
from tfperf.doctor.fix.trials import FixResult, FixTrial
from tfperf.doctor.graph.read import DatasetGraph, GraphStage, read_graph
from tfperf.doctor.rewrites.edits import same_examples

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
