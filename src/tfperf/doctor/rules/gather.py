"""The rule for windows cut one at a time from arrays in memory before their batch: those of
`keras.utils.timeseries_dataset_from_array` (a gather map per window, over a zip of the
array repeated and each window's indices), and rows of many arrays sliced by
from_tensor_slices (a DataFrame's columns). One gather per batch cuts them all at once
(rewrites/gather.py); the expected gain is the share of the measured cost of the pipeline
up to the batch that per-window work takes.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rewrites.gather import find_site
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.doctor.rules.stage_cost import MIN_STAGE_SHARE, prefix_cost
from tfperf.util.format import number

WINDOWS_EDIT = (
    "cut the windows with one gather per batch instead of "
    "timeseries_dataset_from_array: starts = np.arange(0, len(data) - sequence_length + 1, "
    "sequence_stride); tf.data.Dataset.range(len(starts)).shuffle(len(starts))"
    ".batch(batch_size).map(lambda i: (tf.gather(data, tf.gather(starts, i)[:, None] + "
    "tf.range(sequence_length)), tf.gather(targets, tf.gather(starts, i))), "
    "num_parallel_calls=tf.data.AUTOTUNE)"
)
ROWS_EDIT = (
    "batch the row numbers and gather each batch from the columns: "
    "tf.data.Dataset.range(n).shuffle(n).batch(batch_size).map(lambda i: ({k: tf.gather(v, i) "
    "for k, v in columns.items()}, tf.gather(labels, i)), num_parallel_calls=tf.data.AUTOTUNE)"
)
GATHER = Rewrite("gather per batch", WINDOWS_EDIT, at="gather")
# Share of the per-example stages' cost a gather per batch removes (the batch of example
# numbers and its gathers remain; measured 13x on the Hands-On ML windows).
REMOVED = 0.9


@rule("per_example_gather", "input", 55, rewrites=(GATHER,))
def rule_per_example_gather(ctx: Evidence) -> list[Finding]:
    """Examples cut one at a time from in-memory arrays, then batched."""
    site = find_site(ctx.graph)
    if site is None:
        return []
    # Every stage up to the batch works per example (the windows' index maps and zips too).
    cost = prefix_cost(ctx, site.batch.index)
    if cost * ctx.pipeline < MIN_STAGE_SHARE:
        return []
    wall = REMOVED * cost
    new_p = ctx.pipeline_without(wall)
    gain = ctx.speedup_pipeline(new_p, ctx.cpu_of(wall))
    rows = all(c.index is None for c in site.columns)
    title = "windows cut one at a time (a gather map per window)"
    what = (
        f"{len(site.columns)} array(s) held in the graph, each window gathered by its own "
        "map call and batched after (keras.utils.timeseries_dataset_from_array's structure)"
    )
    if rows:  # a DataFrame's columns, sliced by from_tensor_slices
        title = "rows sliced one at a time from many arrays (a DataFrame's columns)"
        what = (
            f"{len(site.columns)} arrays sliced per example by from_tensor_slices and batched "
            f"after: each example is {len(site.columns)} small tensors"
        )
    return [
        Finding(
            "per_example_gather",
            title,
            site.batch.label,
            f"{what}; the stages up to {site.batch.label} take {cost * 1e6:.1f} us per "
            f"example (~{min(1.0, cost * ctx.pipeline):.0%} of the pipeline's time; pipeline "
            f"{number(ctx.pipeline)} ex/s)",
            ROWS_EDIT if rows else WINDOWS_EDIT,
            f"pipeline ~{number(new_p)} ex/s; training ~{gain:.1f}x faster",
            gain,
            "input",
            site.batch.index,
            saves_wall=wall,
            saves_cpu=ctx.cpu_of(wall),
        )
    ]
