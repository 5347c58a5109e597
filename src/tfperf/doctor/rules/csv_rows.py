"""The rule for CSV parsed one row at a time: `tf.data.experimental.make_csv_dataset` (a
CsvDataset per file, then shuffle, batch and a dict) and a plain `CsvDataset` parse each row
with its own call before the batch. Lines read and decoded per batch with one
`tf.io.decode_csv` do the same work once per batch (rewrites/csv_batched.py); the finding
gives that pipeline as code, with the column names of the file's header and the types the
reader uses. Its expected gain is the share of the stages from the read to the batch.
"""

from __future__ import annotations

from tfperf.doctor.evidence.evidence import Evidence
from tfperf.doctor.evidence.findings import Finding
from tfperf.doctor.rewrites.csv_batched import csv_code, find_csv
from tfperf.doctor.rules.registry import Rewrite, rule
from tfperf.doctor.rules.stage_cost import MIN_STAGE_SHARE, prefix_cost
from tfperf.util.format import number

CSV_BATCHED = Rewrite(
    "decode CSV per batch",
    "read the file's lines and decode each batch with one tf.io.decode_csv instead of "
    "parsing row by row: tf.data.TextLineDataset(file).skip(1).shuffle(buffer)"
    ".batch(batch_size).map(lambda lines: tf.io.decode_csv(lines, record_defaults=[...]), "
    "num_parallel_calls=tf.data.AUTOTUNE), the same record defaults (column types) and "
    "column names as before",
    at="csv",
)
# Share of the read-to-batch stages' cost the batched decode removes (the lines are still
# read, shuffled and batched one by one, as one string instead of a row of columns).
REMOVED = 0.7


@rule("per_row_csv", "input", 65, rewrites=(CSV_BATCHED,))
def rule_per_row_csv(ctx: Evidence) -> list[Finding]:
    """CSV rows parsed one at a time, then batched."""
    try:
        found = find_csv(ctx.graph)
    except Exception:  # noqa: BLE001 - a graph it cannot read: no claim
        return []
    if found is None:
        return []
    # The whole prefix up to the batch: the file list's stages cost next to nothing, but
    # their prefixes' rates count files, not rows.
    cost = prefix_cost(ctx, found.batch.index)
    if cost * ctx.pipeline < MIN_STAGE_SHARE:
        return []
    wall = REMOVED * cost
    new_p = ctx.pipeline_without(wall)
    gain = ctx.speedup_pipeline(new_p, ctx.cpu_of(wall))
    how = "make_csv_dataset's CsvDataset" if found.read.op != "CSVDatasetV2" else "CsvDataset"
    note = ", bad rows skipped (ignore_errors)" if found.ignore_errors else ""
    return [
        Finding(
            "per_row_csv",
            "CSV parsed one row at a time",
            found.read.label,
            f"{how} parses each row with its own call ({len(found.defaults)} columns"
            f"{note}); the pipeline up to {found.batch.label} takes "
            f"{cost * 1e6:.1f} us per example (~{min(1.0, cost * ctx.pipeline):.0%} of the "
            f"pipeline's time; pipeline {number(ctx.pipeline)} ex/s)",
            "read lines and decode each batch with one tf.io.decode_csv (the same columns, "
            "types and order):\n" + csv_code(found, ctx.graph.element_spec),
            f"pipeline ~{number(new_p)} ex/s; training ~{gain:.1f}x faster",
            gain,
            "input",
            found.read.index,
            saves_wall=wall,
            saves_cpu=ctx.cpu_of(wall),
        )
    ]
