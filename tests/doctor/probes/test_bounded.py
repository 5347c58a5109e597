"""The doctor within the RAM budget (doctor/probes/bounded.py): a shuffle buffer or cache beyond
it is named from the graph and never filled. A capped copy is timed instead (the buffer cut
to what fits, at most MEASURE_BUFFER elements; the cache left out), sizes read from prefixes
already capped; a real `tfperf doctor` process watched with psutil on pipelines of 1 MiB
examples. How the shuffle finding is worded: rules/test_ram.py."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import (
    MEASURE_BUFFER,
    TIMED_BUFFER,
    UnmeasuredBytes,
    bounded,
    cache_findings,
    element_bytes,
    mean_bytes,
)

from helpers import doctorkit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


PIPELINES = '''"""User pipelines for probes/test_bounded.py."""

import keras
import tensorflow as tf


def big_example(i):
    # 1 MiB per example, made on the fly: no data on disk.
    x = tf.fill([256, 1024], tf.cast(i % 7, tf.float32))
    return x, tf.reshape(tf.cast(i % 2, tf.float32), [1])


def huge_shuffle(batch_size=8, **kwargs):
    ds = tf.data.Dataset.range(4000).map(big_example)
    ds = ds.shuffle(200_000_000)  # 4 GiB if filled: far beyond the 16 MiB budget
    return ds.batch(batch_size)


def big_cache(batch_size=8, **kwargs):
    ds = tf.data.Dataset.range(2000).map(big_example).cache()  # 2 GiB
    return ds.shuffle(64).batch(batch_size)


def big_model():
    return keras.Sequential(
        [keras.Input((256, 1024)), keras.layers.GlobalAveragePooling1D(), keras.layers.Dense(1)]
    )
'''


def write_run(folder: Path, function: str, model: str, **extra: Any) -> Path:
    """`folder/<function>.yaml` naming `pipelines_bounded:<function>` and its model."""
    return doctorkit.write_run(folder, "pipelines_bounded", PIPELINES, function, model, **extra)


def watched(proc: subprocess.Popen, *, max_rss: int, max_seconds: float) -> tuple[str, float, int]:
    """Waits for `proc`, killing it beyond `max_rss` bytes of RSS or `max_seconds`:
    (stdout, seconds, peak RSS); a killed doctor is an AssertionError saying why."""
    start, peak = time.monotonic(), 0
    ps = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        took = time.monotonic() - start
        if peak > max_rss or took > max_seconds:
            proc.kill()  # only the process this test started
            proc.communicate()
            raise AssertionError(f"doctor killed after {took:.0f} s at {peak / 2**30:.2f} GiB RSS")
        time.sleep(0.1)
    out, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    return out, time.monotonic() - start, peak


def codes(diag: dict[str, Any]) -> list[str]:
    return [f["code"] for f in diag["findings"]]


# Also the user pipelines' huge_shuffle case's first finding (test_user_pipelines.py runs
# the doctor in its own process and leaves that case to this watched one).
def test_huge_shuffle_is_named_from_the_graph_and_never_filled(tmp_path: Path):
    run = write_run(tmp_path, "huge_shuffle", "big_model")
    proc = doctorkit.start_doctor(run, "--json", "--budget", "40")
    out, took, peak = watched(proc, max_rss=int(2.5 * 2**30), max_seconds=150)
    diag = json.loads(out)["diagnosis"]
    print(f"doctor: {took:.0f} s, peak RSS {peak / 2**30:.2f} GiB; {codes(diag)}")
    assert codes(diag)[0] == "shuffle_over_budget", codes(diag)
    assert "200,000,000 elements" in diag["findings"][0]["evidence"]
    assert any("timed with a buffer of" in n for n in diag["notes"]), diag["notes"]


def test_cache_over_budget_is_named_and_left_out_of_the_timed_copy(tmp_path: Path):
    # Probes long enough that a timed copy which kept the cache would fill it past the bound
    # below (measured with the cache kept: 2.0-2.2 GiB peak; left out: 0.75-0.77 GiB).
    run = write_run(tmp_path, "big_cache", "big_model", doctor={"steps": 12, "min_seconds": 0.3})
    proc = doctorkit.start_doctor(run, "--json", "--budget", "40")
    out, took, peak = watched(proc, max_rss=int(2.5 * 2**30), max_seconds=150)
    diag = json.loads(out)["diagnosis"]
    print(f"doctor: {took:.0f} s, peak RSS {peak / 2**30:.2f} GiB; {codes(diag)}")
    first = diag["findings"][0]
    assert first["code"] == "cache_over_budget", codes(diag)
    assert "2,000 elements" in first["evidence"] and first["kind"] == "risk"
    assert any("timed without the cache" in n for n in diag["notes"]), diag["notes"]
    # What the doctor holds beyond TensorFlow's own: far less than the 2 GiB cache.
    assert peak < 1.4 * 2**30, peak


# ---- the capped copy, in this process: nothing over the budget is filled ----------------------
def test_element_bytes_count_strings_by_their_length():
    element = (np.ones((4, 2), np.float32), np.array([b"abc", b"de"], dtype=object))
    assert element_bytes(element) == 4 * 2 * 4 + (3 + 2) + 8 * 2
    assert mean_bytes(tf.data.Dataset.range(10)) == 8


def test_a_shuffle_over_the_budget_is_timed_with_the_buffer_that_fits():
    ds = tf.data.Dataset.range(10**6).map(lambda i: tf.fill([256], i)).shuffle(10**6).batch(4)
    graph = lint.read_graph(ds)
    b = bounded(ds, graph, budget=2**20)  # 2 KiB per element: ~400 fit in 1 MiB
    (at,) = b.capped
    assert graph.stages[at].kind == "shuffle" and b.bytes_in[at] == 2048
    assert 1 <= b.capped[at] <= min(MEASURE_BUFFER, 2**20 // 2048)
    capped = next(s for s in lint.read_graph(b.dataset).stages if s.kind == "shuffle")
    assert capped.buffer_size == b.capped[at]
    assert b.notes == [
        f"{graph.stages[at].label}: timed with a buffer of {b.capped[at]:,} elements (the "
        "requested one does not fit the RAM budget)"
    ]
    assert next(iter(b.dataset)).shape == (4, 256)
    # Within the budget: nothing capped for RAM, the buffer only timed smaller.
    small = bounded(ds, graph, budget=2**40)
    assert small.capped == {} and small.timed_buffers == {at: TIMED_BUFFER}
    assert not any("does not fit the RAM budget" in n for n in small.notes)


def test_a_cache_over_the_budget_is_left_out_and_named(tmp_path: Path):
    ds = tf.data.Dataset.range(1000).map(lambda i: tf.fill([256], i)).cache().shuffle(8).batch(4)
    graph = lint.read_graph(ds)
    b = bounded(ds, graph, budget=2**20)  # 1,000 x 2 KiB = 2 MiB
    (cache, n, per), *_ = b.oversize_caches
    assert cache.kind == "cache" and n == 1000 and per == 2048
    assert "cache" not in [s.kind for s in b.graph.stages]  # its prefix is not timed
    assert "cache" not in [s.kind for s in lint.read_graph(b.dataset).stages]
    assert b.cache_notes == [
        f"{cache.label}: timed without the cache (it would outgrow the RAM budget)"
    ]
    (f,) = cache_findings(b, 2**20)
    assert f.code == "cache_over_budget" and f.kind == "risk" and f.stage_index == cache.index
    assert "1,000 elements x 2,048 B = 2.0 MiB" in f.evidence
    # An endless cache outgrows any budget; a cache to a file holds nothing in RAM.
    endless = tf.data.Dataset.range(8).repeat().cache().batch(4)
    (f,) = cache_findings(bounded(endless, lint.read_graph(endless), 2**40), 2**40)
    assert "elements without end" in f.evidence
    on_disk = tf.data.Dataset.range(1000).map(lambda i: tf.fill([256], i))
    on_disk = on_disk.cache(str(tmp_path / "cache"))
    assert bounded(on_disk, lint.read_graph(on_disk), 2**20).oversize_caches == []


def test_a_shuffle_after_a_decode_also_gets_the_bytes_before_the_decode():
    def decode(i):
        return tf.fill([256], tf.cast(i, tf.float32))

    ds = tf.data.Dataset.range(100).map(decode).shuffle(50).batch(4)
    graph = lint.read_graph(ds)
    b = bounded(ds, graph, budget=2**30)
    at = next(s.index for s in graph.stages if s.kind == "shuffle")
    assert b.bytes_in[at] == 1024 and b.early_bytes == {at: 8}  # floats, then an int64 index
    first = tf.data.Dataset.range(100).shuffle(50).map(decode)  # nothing to move: no entry
    assert bounded(first, lint.read_graph(first), budget=2**30).early_bytes == {}


def test_element_bytes_of_ragged_and_sparse_tensors_count_their_parts():
    ragged = tf.ragged.constant([[1, 2, 3], [4]], dtype=tf.int32)  # 4 values, 3 row splits
    assert element_bytes({"tags": ragged}) == 4 * 4 + 3 * 8
    sparse = tf.sparse.SparseTensor([[0, 1], [2, 0]], tf.constant([1.0, 2.0]), [3, 4])
    assert element_bytes(sparse) == 2 * 2 * 8 + 2 * 4 + 2 * 8


def test_element_bytes_of_an_opaque_variant_is_not_measured():
    variant = tf.raw_ops.RaggedTensorToVariant(
        rt_nested_splits=[tf.constant([0, 1], tf.int64)],
        rt_dense_values=tf.constant([1]),
        batched_input=False,
    )
    with pytest.raises(UnmeasuredBytes, match="not measured: .*variant"):
        element_bytes((variant, tf.constant(1)))


def test_a_shuffle_of_ragged_examples_is_sized_from_their_values():
    tags = tf.ragged.constant([[1] * (1 + i % 4) for i in range(200)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((tags, tf.range(200))).shuffle(10_000)
    ds = ds.ragged_batch(8)
    graph = lint.read_graph(ds)
    shuffle = next(st for st in graph.stages if st.kind == "shuffle")
    b = bounded(ds, graph, budget=2**30)
    # Mean of the first 4 examples: 1..4 int64 tags (2.5 * 8 B) and an int32 label.
    assert b.bytes_in[shuffle.index] == int((1 + 2 + 3 + 4) * 8 / 4 + 4)
    assert not b.capped and not b.unmeasured


def test_a_shuffle_whose_elements_cannot_be_sized_is_timed_with_a_bounded_buffer():
    """A pipeline rebuilt from its graph: the source's ragged structure is unknown, so its
    element size is a note, and a huge buffer is timed with at most MEASURE_BUFFER."""
    tags = tf.ragged.constant([[1] * (1 + i % 4) for i in range(50)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices(tags).shuffle(1_000_000).ragged_batch(8)
    ds = lint.rebuild(lint.read_graph(ds).graph_def, ds.element_spec)
    graph = lint.read_graph(ds)
    shuffle = next(st for st in graph.stages if st.kind == "shuffle")
    b = bounded(ds, graph, budget=2**30)
    assert b.capped == {shuffle.index: MEASURE_BUFFER}
    assert any("element size not measured" in note for note in b.notes)
    assert sum(int(x.nrows()) for x in b.dataset) == 50


def test_a_large_shuffle_within_the_budget_is_timed_with_a_small_buffer():
    # Every probe refills the buffer in its warm-up: a shuffle(20000) after an unbatch took 9 s
    # per probe beside two CPU hogs. Its rate per element does not depend on its size.
    import tensorflow as tf

    ds = tf.data.Dataset.range(5000).shuffle(2000).map(lambda x: x * 2).batch(10)
    graph = lint.read_graph(ds)
    b = bounded(ds, graph, budget=2**30)
    at = next(s.index for s in graph.stages if s.kind == "shuffle")
    assert b.timed_buffers == {at: TIMED_BUFFER} and b.capped == {}
    timed = next(s for s in lint.read_graph(b.dataset).stages if s.kind == "shuffle")
    assert timed.buffer_size == TIMED_BUFFER
    assert sorted(int(x) for batch in b.dataset for x in batch) == list(range(0, 10000, 2))
    assert any(f"timed with a buffer of {TIMED_BUFFER} elements" in n for n in b.notes), b.notes
    small = tf.data.Dataset.range(50).shuffle(TIMED_BUFFER).batch(10)
    assert bounded(small, lint.read_graph(small), budget=2**30).dataset is small
