"""The rules about per-example stages: a Python function (py_function, numpy_function) or
generator feeding the pipeline, and examples parsed or mapped one at a time before the batch
when they could be batched (--fix vectorizes them, or moves the map after the batch). Each
finding's expected gain is the share of the stage's measured cost its change removes
(stage_cost.py).
"""

from __future__ import annotations

from tfperf.doctor.rules.registry import Rewrite
from tfperf.doctor.rules.stage_cost import batchable_map, per_example_parse, stage_rule

VECTORIZE = Rewrite(
    "vectorize per-example maps",
    # fix/pipeline_file.py adds tf.io.parse_example when the user's function parses per
    # example: the edit names only what the function calls.
    "batch first, then map a function that takes the whole batch (batched ops)",
    at="vectorize",
)
BATCH_FIRST = Rewrite(
    "batch before per-example map",
    "move this map after .batch() (its function already works on a whole batch: the same "
    "ops, once per batch)",
    at="batch_move",
)
FISSION = Rewrite(
    "split per-example maps",
    "split the map after its last per-example op (file read, image decode, resize to a fixed "
    "size): map that part, batch, then map the rest on the whole batch (batched ops)",
    at="vectorize",
)
BATCHED_PARSE = Rewrite("batched parse")  # the run file's pipeline.parse: batched
PARSE_PER_BATCH = Rewrite(
    "parse per batch, then unbatch",
    "before a padded_batch, a bucketing or a filter: .batch() the records, parse the batch "
    "with one tf.io.parse_example (each VarLenFeature as tf.io.RaggedFeature), then "
    ".unbatch(): the same examples, one parse call per batch",
    at="parse_batch",
)

rule_py_function = stage_rule(
    "py_function",
    60,
    "Python function (py_function/numpy_function) in the pipeline",
    "compute it once offline and store the result in TFRecords (offline preprocessing: "
    "`tfperf convert`, the workload's offline_preprocess), or rewrite it with TensorFlow ops",
    lambda ctx, st: st.has_py_func and not st.is_generator,
)
rule_from_generator = stage_rule(
    "from_generator",
    50,
    "data fed from a Python generator (from_generator)",
    "write the data to TFRecord shards (`tfperf convert`) or build it in the graph "
    "(from_tensor_slices / tf ops); every element now takes a Python round trip under the GIL",
    lambda ctx, st: st.is_generator,
)


rule_per_example_parse = stage_rule(
    "per_example_parse",
    70,
    "Examples parsed one at a time before batch",
    "batch first, then parse the whole batch with one tf.io.parse_example (run file: "
    "pipeline.parse: batched)",
    per_example_parse,
    rewrites=(VECTORIZE, BATCH_FIRST, BATCHED_PARSE, PARSE_PER_BATCH),
)
rule_per_example_map = stage_rule(
    "per_example_map",
    80,
    "per-example map that could run on batches",
    "move the map after batch() and write it for a batch (vectorized): the per-call "
    "overhead (~20 us) is then paid once per batch",
    batchable_map,
    rewrites=(VECTORIZE, BATCH_FIRST, FISSION),
)
