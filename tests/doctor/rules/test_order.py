"""The doctor's stage-order rules, on real datasets' graphs (nothing runs): batch().shuffle()
shuffles whole batches, repeat().shuffle() mixes epochs; both are "data" findings with the
concrete reorder, ranked before speed advice, with the user's file and line when the run
file names a pipeline function; pipelines in the right order get neither, and a constant or
counter repeated to be zipped beside the data is no epoch."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfperf.doctor.rules import run_rules
from tfperf.doctor.rules.order import (
    rule_repeat_before_shuffle,
    rule_shuffle_after_batch,
)


def test_shuffle_after_batch_is_a_data_finding_with_the_reorder(evidence):
    ds = tf.data.Dataset.range(64).batch(8).shuffle(4).prefetch(2)
    (f,) = rule_shuffle_after_batch(evidence(ds))
    assert f.code == "shuffle_after_batch" and f.kind == "data" and f.expected_speedup is None
    assert f.stage.startswith("shuffle#") and "batch#" in f.evidence
    assert "same batches" in f.evidence
    # The change: shuffle examples first; a buffer holding as many examples (4 batches of 8).
    assert ".shuffle(buffer).batch(batch_size)" in f.change and "shuffle(32)" in f.change


def test_a_shuffle_of_files_does_not_shuffle_the_examples(evidence, record_files):
    files = tf.data.Dataset.from_tensor_slices(record_files).shuffle(2)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2).batch(8).shuffle(4)
    assert [f.code for f in rule_shuffle_after_batch(evidence(ds))] == ["shuffle_after_batch"]


@pytest.mark.parametrize(
    "build",
    [
        lambda: tf.data.Dataset.range(64).shuffle(64).batch(8).prefetch(2),
        # Examples shuffled before the batch: shuffling the batches as well does no harm.
        lambda: tf.data.Dataset.range(64).shuffle(64).batch(8).shuffle(4),
        lambda: tf.data.Dataset.range(64).batch(8).unbatch().shuffle(64).batch(8),
        lambda: tf.data.Dataset.range(64).shuffle(16).repeat(3).batch(8),
        lambda: tf.data.Dataset.range(64).repeat(2).batch(8),
    ],
    ids=["shuffle-batch", "both-shuffles", "unbatched", "shuffle-repeat", "no-shuffle"],
)
def test_pipelines_in_the_right_order_get_no_order_finding(build, evidence):
    found = [f.code for f in run_rules(evidence(build()))]
    assert "shuffle_after_batch" not in found and "repeat_before_shuffle" not in found, found


def test_repeat_before_shuffle_is_a_data_finding_with_the_reorder(evidence, record_files):
    ds = tf.data.Dataset.range(64).repeat(3).shuffle(16).batch(8)
    (f,) = rule_repeat_before_shuffle(evidence(ds))
    assert f.code == "repeat_before_shuffle" and f.kind == "data" and f.expected_speedup is None
    assert f.stage.startswith("shuffle#") and f.evidence.startswith("repeat#")
    assert ".shuffle(buffer).repeat(epochs)" in f.change
    # Repeating the file list before the shuffle of its records mixes epochs as well.
    files = tf.data.Dataset.from_tensor_slices(record_files).repeat(2)
    ds = files.interleave(tf.data.TFRecordDataset, cycle_length=2).shuffle(8)
    assert [f.code for f in rule_repeat_before_shuffle(evidence(ds))] == ["repeat_before_shuffle"]


def test_a_wrong_order_comes_before_speed_advice(evidence):
    # Input-bound, and no prefetch would promise 10x: the order still comes first.
    ds = tf.data.Dataset.range(64).repeat(2).batch(8).shuffle(4)
    rates = {"pipeline": 10.0, "compute": 10.0, "training": 1.0, "input_bound_fraction": 0.5}
    codes = [f.code for f in run_rules(evidence(ds, **rates))]
    assert codes[:2] == ["shuffle_after_batch", "repeat_before_shuffle"], codes
    assert "no_prefetch" in codes, codes


def test_the_change_names_the_users_file_and_line(evidence, tmp_path):
    from tfperf.config import load_config
    from tfperf.doctor.graph.user_source import user_source

    module = tmp_path / "my_input.py"
    module.write_text(
        textwrap.dedent(
            """\
            import tensorflow as tf


            def make_dataset(batch_size=8, **kwargs):
                ds = tf.data.Dataset.range(64)
                ds = ds.repeat(3)  # three epochs
                ds = ds.batch(batch_size)
                # a comment mentioning .shuffle( is not code
                ds = ds.shuffle(4)
                return ds.prefetch(2)
            """
        )
    )
    run = tmp_path / "run.yaml"
    run.write_text("data:\n  pipeline: my_input:make_dataset\npipeline:\n  batch_size: 8\n")
    source = user_source(load_config(run))
    assert source is not None and Path(source.file) == module
    ds = tf.data.Dataset.range(64).repeat(3).batch(8).shuffle(4)
    found = {f.code: f for f in run_rules(evidence(ds, source=source))}
    assert f"{module}:9: `ds = ds.shuffle(4)`" in found["shuffle_after_batch"].change
    assert f"{module}:6: `ds = ds.repeat(3)  # three epochs`" in (
        found["repeat_before_shuffle"].change
    )
    # Without the function's source (a dataset given from Python): no file and line.
    assert " (at " not in run_rules(evidence(ds))[0].change


# ---- a repeat before a shuffle: of the data, not of a constant zipped beside it -------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: tf.data.Dataset.range(10).repeat().shuffle(4),
        lambda: tf.data.Dataset.range(10).repeat(3).shuffle(4).batch(2),
        # Zipped with another endless dataset: the epochs of the data do mix.
        lambda: tf.data.Dataset.zip(
            (tf.data.Dataset.range(5).repeat(), tf.data.Dataset.range(10).repeat())
        ).shuffle(4),
    ],
    ids=["repeat_forever", "repeat_3", "zip_endless"],
)
def test_a_repeat_of_the_data_before_a_shuffle_is_still_found(make, evidence):
    assert [f.code for f in rule_repeat_before_shuffle(evidence(make()))] == [
        "repeat_before_shuffle"
    ]


def test_a_constant_or_counter_repeated_for_a_zip_is_no_epoch(evidence):
    data = tf.data.Dataset.from_tensor_slices(np.arange(20))
    for repeated in (
        tf.data.Dataset.from_tensors(np.arange(5)).repeat(),
        tf.data.Dataset.range(3).repeat(),
    ):
        ds = tf.data.Dataset.zip((repeated, data)).shuffle(8).batch(4)
        assert rule_repeat_before_shuffle(evidence(ds)) == []
