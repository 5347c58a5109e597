"""runreport/events: a TensorBoard log folder's scalars read back as (step, value) lists per
tag, from real event files: TF2's tensor summaries and old simple_value ones, sorted by step,
a step written twice keeps its last value, non-finite values left out."""

from __future__ import annotations

import math
import time

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from tfperf.runreport.events import has_events, read_scalars


def test_tf2_scalars_sorted_by_step_and_non_finite_left_out(tmp_path, scalars_writer):
    logs = scalars_writer(
        tmp_path / "train",
        {
            "loss": [(20, 0.5), (10, 0.9), (30, math.nan)],
            "step/examples_per_sec": [(10, 1000.0), (20, math.inf)],
        },
    )
    assert has_events(logs)
    got = read_scalars(logs)
    assert [s for s, _ in got["loss"]] == [10, 20]
    assert [round(v, 5) for _, v in got["loss"]] == [0.9, 0.5]  # float32 summaries
    assert got["step/examples_per_sec"] == [(10, 1000.0)]


def test_a_resumed_run_that_wrote_a_step_twice_keeps_the_last_value(tmp_path, scalars_writer):
    logs = tmp_path / "train"
    scalars_writer(logs, {"loss": [(10, 0.9), (20, 0.7)]})
    # Event files are read in name order, which starts with the second they were created:
    # the resumed run's file comes a second later (in one second their order was a toss-up).
    time.sleep(1.1)
    scalars_writer(logs, {"loss": [(20, 0.6), (30, 0.4)]})  # a second file, written later
    (value,) = [v for s, v in read_scalars(logs)["loss"] if s == 20]
    assert abs(value - 0.6) < 1e-6 and len(read_scalars(logs)["loss"]) == 3


def test_simple_value_scalars_of_older_writers(tmp_path):
    # A file of simple_value scalars only once raised KeyError (no 'scalars' plugin).
    writer = EventFileWriter(str(tmp_path))
    for step, value in ((2, 0.25), (1, 0.5)):
        summary = summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag="acc", simple_value=value)]
        )
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary))
    writer.close()
    assert read_scalars(tmp_path) == {"acc": [(1, 0.5), (2, 0.25)]}


def test_a_folder_without_event_files_reads_as_empty(tmp_path):
    assert not has_events(tmp_path / "absent")
    (tmp_path / "notes.txt").write_text("not an event file")
    assert not has_events(tmp_path) and read_scalars(tmp_path) == {}
