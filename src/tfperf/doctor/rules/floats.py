"""The rule for float64 arrays held in the pipeline's graph (from_tensor_slices, from_tensors,
a captured NumPy array: float64 is what NumPy and pandas give): every example is copied and
computed at twice float32's bytes, and the model casts it to float32 anyway. --fix retypes
the pipeline to float32 from those arrays on (rewrites/floats.py), checked within float32's
tolerance; the output cast (rules/pipeline_end.py's float64) is what is left otherwise.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rewrites.floats import float64_constants
from tfperf.doctor.rules.registry import Rewrite, rule

FLOAT32_SOURCE = Rewrite(
    "float32 at the source",
    "cast the float64 arrays to float32 once, where the pipeline is built "
    "(np.asarray(array, np.float32), or df.astype('float32') for a DataFrame) before "
    "from_tensor_slices / timeseries_dataset_from_array, instead of casting every batch",
    at="source",
)
MIN_ELEMENTS = 1024  # float64 scalars of a function (a Python 0.5) are no array to cast


@rule("float64_source", "input", 142, rewrites=(FLOAT32_SOURCE,))
def rule_float64_source(ctx: Evidence) -> list[Finding]:
    """float64 arrays of at least MIN_ELEMENTS elements held as the graph's constants."""
    n = float64_constants(ctx.graph.graph_def)
    if n < MIN_ELEMENTS:
        return []
    return [
        Finding(
            "float64_source",
            "float64 arrays at the source",
            ctx.graph.stages[0].label,
            f"the pipeline holds {n:,} float64 values ({n * 8 / 2**20:,.1f} MiB) as constants: "
            "each example is cut, copied and computed at twice float32's bytes, and the "
            "model casts it to float32",
            FLOAT32_SOURCE.edit or "",
            "half the bytes per example from the source on (its gain: --fix's trial)",
            None,
            "input",
            0,
        )
    ]
