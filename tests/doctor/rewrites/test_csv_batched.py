"""CSV rows parsed one at a time, read as lines and decoded per batch instead
(doctor/rewrites/csv_batched.py): make_csv_dataset and CsvDataset keep their batches (the same
ones, in order, when nothing shuffles), their dict, their repeat and their options; a file
whose bad rows ignore_errors would skip is left alone; the rewrite decodes per batch. The rule
naming it: rules/test_csv_rows.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from public_pipelines import cases

import tfperf
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.csv_batched import batched_csv, find_csv
from tfperf.doctor.rules.csv_rows import CSV_BATCHED
from tfperf.measure import same_examples
from tfperf.measure.examples import compare_examples

COLUMNS = ["label", "city", "age", "score", "note"]


def _write(path: Path, rows: int = 300, seed: int = 0, delim: str = ",") -> str:
    rng = np.random.default_rng(seed)
    lines = [delim.join(COLUMNS)]
    for i in range(rows):
        city = rng.choice(["Paris", "Lyon", '"Aix, en Provence"'])
        note = "" if i % 7 == 0 else f"n{i}"  # some empty: make_csv_dataset's na_value
        fields = [str(i % 2), str(city), str(rng.integers(1, 90)), f"{rng.normal():.4f}", note]
        lines.append(delim.join(fields))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _kinds(ds: tf.data.Dataset) -> list[str]:
    return [s.kind for s in lint.read_graph(ds).stages]


def _ops(graph: lint.DatasetGraph) -> set[str]:
    """Every op of the pipeline's graph, its functions' included."""
    lib = graph.graph_def.library.function
    return {n.op for n in graph.graph_def.node} | {n.op for f in lib for n in f.node_def}


def _same_batches(a: tf.data.Dataset, b: tf.data.Dataset) -> None:
    for x, y in zip(a, b, strict=True):
        fx, fy = tf.nest.flatten(x), tf.nest.flatten(y)
        for u, v in zip(fx, fy, strict=True):
            np.testing.assert_array_equal(u.numpy(), v.numpy())


@pytest.mark.parametrize(
    "kw",
    [
        {"label_name": "label", "num_epochs": 1},
        {"label_name": "label", "num_epochs": 1, "ignore_errors": True},
        {"num_epochs": 1, "select_columns": ["city", "score", "label"]},
        {"label_name": "label", "num_epochs": 1, "column_defaults": [0, "", 0.0, 0.0, "?"]},
    ],
    ids=["label", "ignore_errors", "select_columns", "column_defaults"],
)
def test_unshuffled_make_csv_dataset_gives_the_same_batches_in_order(tmp_path, kw):
    path = _write(tmp_path / "data.csv")
    ds = tf.data.experimental.make_csv_dataset(path, batch_size=32, shuffle=False, **kw)
    out = batched_csv(lint.read_graph(ds), ds)
    assert out is not None
    stages = lint.read_graph(out).stages
    # The rows are lines up to the batch, one decode_csv per batch right after it.
    batch = next(s for s in stages if s.kind == "batch")
    assert batch.output_dtypes == ["string"]
    after = stages[batch.index + 1]
    assert after.kind == "map" and "DecodeCSV" in after.fn_ops and after.parallel
    assert not any("CSVDataset" in op for s in stages for op in s.fn_ops | {s.op})
    assert out.element_spec == ds.element_spec
    assert out.doctor_note.startswith("the lines of 1 file(s) decoded per batch: one decode_csv")
    _same_batches(ds, out)


def test_shuffled_and_repeated_rows_keep_their_examples(tmp_path):
    path = _write(tmp_path / "data.csv")
    ds = tf.data.experimental.make_csv_dataset(path, batch_size=16, label_name="label")
    assert "repeat" in _kinds(ds)  # num_epochs=None: forever, batches of exactly 16
    out = batched_csv(lint.read_graph(ds), ds)
    assert out is not None and "repeat" in _kinds(out)
    assert out.element_spec == ds.element_spec
    old, new = out.doctor_check  # what fix/ compares: the batches without shuffles
    diff = compare_examples(old, new, limit=900)
    assert diff.same and diff.total_a >= 900, diff
    first = next(iter(out))
    assert first[1].shape == (16,) and first[0]["city"].dtype == tf.string


def test_several_files_read_in_parallel(tmp_path):
    files = [_write(tmp_path / f"part-{i}.csv", rows=100, seed=i) for i in range(3)]
    ds = tf.data.experimental.make_csv_dataset(
        files, batch_size=10, label_name="label", num_epochs=1, num_parallel_reads=3
    )
    out = batched_csv(lint.read_graph(ds), ds)
    assert out is not None and same_examples(ds, out)


def test_a_csv_dataset_of_its_own(tmp_path):
    path = _write(tmp_path / "data.csv", delim=";")
    defaults = [tf.constant([0]), tf.constant([""]), tf.constant([0]), tf.constant([0.0]), [""]]
    reader = tf.data.experimental.CsvDataset(path, defaults, header=True, field_delim=";")
    ds = reader.batch(20).map(lambda *cols: (cols[1:], cols[0]))
    out = batched_csv(lint.read_graph(ds), ds)
    assert out is not None and _kinds(out)[0] == "source"
    _same_batches(ds, out)


def test_rows_ignore_errors_would_skip_leave_the_file_alone(tmp_path):
    path = _write(tmp_path / "data.csv")
    with open(path, "a") as f:
        f.write("1,Paris,not a number,0.5,x\n")  # a bad row, skipped by ignore_errors
    ds = tf.data.experimental.make_csv_dataset(
        path,
        batch_size=32,
        label_name="label",
        num_epochs=1,
        ignore_errors=True,
        column_defaults=[0, "", 0, 0.0, ""],
    )
    assert find_csv(lint.read_graph(ds)) is not None
    assert batched_csv(lint.read_graph(ds), ds) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda p: tf.data.TextLineDataset(p).batch(8),
        lambda p: tf.data.Dataset.from_tensor_slices(np.arange(10)).batch(2),
        # Parsed rows mapped one at a time before the batch: not only shuffles on the way.
        lambda p: (
            tf.data.experimental.CsvDataset(p, [[0]] * 1 + [[""]] * 4, header=True)
            .map(lambda *c: c[0])
            .batch(8)
        ),
    ],
    ids=["lines", "not_csv", "map_before_batch"],
)
def test_other_pipelines_are_left_alone(tmp_path, make):
    ds = make(_write(tmp_path / "data.csv"))
    graph = lint.read_graph(ds)
    assert find_csv(graph) is None and batched_csv(graph, ds) is None


# ---- the Titanic tutorial (tests/doctor/public_pipelines) ----------------------------------
# ---- the Titanic tutorial (tests/doctor/public_pipelines) ----------------------------------
@pytest.fixture(scope="module")
def titanic(tmp_path_factory: pytest.TempPathFactory) -> tuple[cases.Case, str]:
    case = cases.BY_NAME["titanic_make_csv"]
    return case, cases.make(case, Path(tmp_path_factory.mktemp("public")))


def test_decoding_per_batch_is_built_as_named_and_replayed_by_name(titanic):
    case, folder = titanic
    ds = case.original(folder, case.batch_size)
    out = tfperf.apply_rewrites(ds, [CSV_BATCHED.label])
    assert same_examples(ds, out)
    # Rows are no longer decoded one at a time by CsvDataset: lines are batched, then one
    # DecodeCSV per batch runs in a parallel map (the gain is measured in
    # benchmarks/bench_doctor_public.py, not here).
    before, after = lint.read_graph(ds), lint.read_graph(out)
    assert any(op.startswith("CSVDataset") for op in _ops(before))
    assert not any(op.startswith("CSVDataset") for op in _ops(after))
    assert "DecodeCSV" in _ops(after)
    stages = after.stages
    first_batch = next(i for i, st in enumerate(stages) if st.kind == "batch")
    assert stages[first_batch + 1].kind == "map" and stages[first_batch + 1].parallelism
