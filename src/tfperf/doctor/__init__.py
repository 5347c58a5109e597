"""The doctor: reads the pipeline's graph (graph/), measures a training run's input
pipeline, model and both together (diagnosis/, with probes/) into the evidence the rules
judge (evidence/, rules/), tries rewrites (rewrites/) and keeps the measured fixes (fix/);
report/ renders it all, api.py runs it on any dataset from Python. ARCHITECTURE.md has one
line per subpackage."""

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
