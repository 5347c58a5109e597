"""measure/probes on real tf.data pipelines and a real compiled step: counts are exact,
warm-up is not counted, variants interleave, and a time limit ends the rounds. A timed
training probe under a time limit cannot cut a compiled call short: it times one step, sizes
its calls to the limit, and a what-if (give_up) whose one step is over the limit is not
measured (TooSlow) while a required rate still is."""

from __future__ import annotations

import time

import pytest
import tensorflow as tf

from tfperf.measure import (
    cached_batch,
    leading_dim,
    measure_one,
    pipeline_probe,
    repeat_if_finite,
    side_by_side,
    training_probe,
)
from tfperf.measure.probes import TooSlow


def test_probes_of_one_element_spec_share_one_trace_of_the_pulling_loop():
    from tfperf.measure.probes import _consumer

    a = tf.data.Dataset.range(1000).batch(10)
    b = a.map(lambda x: x * 3)  # another pipeline with a's element spec
    # Another spec, one no other test traces (the loop is shared by the worker's process).
    c = a.map(lambda x: tf.cast(tf.stack([x, x, x, x, x, x, x], axis=1), tf.float16))
    side_by_side([pipeline_probe("a", a, batches=2, warmup=1)], repeats=1)
    before = _consumer().experimental_get_tracing_count()
    probes = [pipeline_probe(n, d, batches=2, warmup=1) for n, d in (("a", a), ("b", b))]
    side_by_side(probes, repeats=2)
    assert _consumer().experimental_get_tracing_count() == before
    side_by_side([pipeline_probe("c", c, batches=2, warmup=1)], repeats=1)
    assert _consumer().experimental_get_tracing_count() == before + 1


def test_pipeline_probe_counts_examples_of_timed_batches_only():
    ds = tf.data.Dataset.range(1000).batch(10)  # finite: the probe repeats it
    m = measure_one(pipeline_probe("p", ds, batches=7, warmup=3, chunk=7), repeats=2)
    assert [(r.batches, r.examples) for r in m.runs] == [(7, 70), (7, 70)]
    assert m.examples_per_s.median > 0 and m.examples_per_batch == 10


def test_pipeline_probe_counts_a_last_partial_batch_by_its_rows():
    ds = tf.data.Dataset.range(25).batch(10)  # 10, 10, 5 then again
    m = measure_one(pipeline_probe("p", ds, batches=3, warmup=3, chunk=3), repeats=1)
    assert m.runs[0].examples == 25  # warm-up took one whole pass; the timed one another


def test_pipeline_probe_counts_rows_of_batches_of_unknown_rank():
    """A py_function's output has no static shape: its batches still count their rows
    (each was counted as one example, putting a py_function stage 32x too slow)."""
    ds = tf.data.Dataset.range(640).batch(32)
    ds = ds.map(lambda x: tf.py_function(lambda v: v * 2, [x], tf.int64))
    assert ds.element_spec.shape.rank is None
    m = measure_one(pipeline_probe("p", ds, batches=4, warmup=1, chunk=4), repeats=1)
    assert (m.runs[0].batches, m.runs[0].examples) == (4, 128)


def test_side_by_side_interleaves_variants_in_every_round():
    order: list[tuple[str, int]] = []
    probes = [
        pipeline_probe(n, tf.data.Dataset.range(100).batch(5), batches=2, warmup=1)
        for n in ("a", "b")
    ]
    out = side_by_side(probes, repeats=3, on_run=lambda name, r: order.append((name, r)))
    assert order == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert [len(m.runs) for m in out.values()] == [3, 3]


def test_side_by_side_stops_starting_rounds_after_the_time_limit():
    probes = [pipeline_probe("a", tf.data.Dataset.range(100).batch(5), batches=2, warmup=1)]
    out = side_by_side(probes, repeats=50, time_limit=0.0)
    assert len(out["a"].runs) == 1  # the first round always runs


def test_training_probe_runs_a_compiled_step_and_reports_its_input_wait():
    w = tf.Variable(0.0)

    @tf.function
    def steps(it, n):
        for _ in tf.range(n):
            w.assign_add(tf.reduce_sum(tf.cast(next(it), tf.float32)))
        return tf.constant(0.25)

    ds = cached_batch(tf.data.Dataset.from_tensor_slices(tf.ones([64, 3])).batch(8))
    probe = training_probe(
        "t", lambda it, n: float(steps(it, n)), ds, steps=5, warmup=2, examples_per_step=8
    )
    m = measure_one(probe, repeats=2)
    assert [(r.batches, r.examples, r.wait_seconds) for r in m.runs] == [(5, 40, 0.25)] * 2
    # two warm-up calls of 2 steps and one timed call of 5 steps per repeat, 8 x 3 ones each
    assert float(w.numpy()) == 2 * (2 + 2 + 5) * 24


def test_a_runner_that_counts_its_examples_is_believed_over_full_batches():
    """A runner returning (wait, examples) sets the repeat's examples: 5 steps of a
    pipeline whose batches hold 8, 8, 3 rows are 30 examples, not 5 x 8."""
    rows = [8, 8, 3, 8, 3]

    def steps(it, n):
        return 0.0, sum(rows[:n])

    probe = training_probe(
        "t", steps, tf.data.Dataset.range(100), steps=5, warmup=1, examples_per_step=8
    )
    assert probe().examples == 30


def test_leading_dim_and_repeat_if_finite():
    assert leading_dim((tf.zeros([7, 2]), tf.zeros([7]))) == 7
    assert leading_dim(tf.constant(3)) == 1
    inf = tf.data.Dataset.range(3).repeat()
    assert repeat_if_finite(inf) is inf
    finite = repeat_if_finite(tf.data.Dataset.range(3))
    assert list(finite.take(5).as_numpy_iterator()) == [0, 1, 2, 0, 1]


def slow_steps(seconds_per_step: float, calls: list[int]):
    def run_steps(it, n: int) -> float:
        calls.append(n)
        for _ in range(n):
            next(it)
            time.sleep(seconds_per_step)
        return 0.0

    return run_steps


def test_a_what_if_whose_one_step_is_over_the_limit_gives_up():
    calls: list[int] = []
    ds = tf.data.Dataset.range(1000)
    probe = training_probe(
        "slow",
        slow_steps(0.3, calls),
        ds,
        steps=30,
        warmup=5,
        examples_per_step=1,
        time_limit=0.1,
        give_up=True,
    )
    with pytest.raises(TooSlow, match="one step took 0.3 s, over the 0.1 s"):
        probe()
    assert calls == [1, 1]  # one traced step, one timed: never 30 or the 5 warm-up steps


def test_a_required_rate_is_still_measured_in_calls_sized_to_the_limit():
    calls: list[int] = []
    ds = tf.data.Dataset.range(1000)
    probe = training_probe(
        "slow",
        slow_steps(0.02, calls),
        ds,
        steps=30,
        warmup=5,
        examples_per_step=1,
        time_limit=0.2,
    )
    run = probe()
    assert run.examples > 0
    # a quarter of the limit per call: 0.05 s / 0.02 s per step -> 2 steps, not 30
    assert max(calls[2:]) <= 3, calls


def test_a_pipeline_of_slow_batches_is_pulled_in_chunks_sized_to_the_limit():
    """Issue 30: one batch of a video pipeline takes seconds; under a time limit the warm-up
    stops at the limit and the timed chunks are sized to it (one batch first), not the
    fixed `warmup` and `chunk` counts that held a repeat for minutes."""
    pulled: list[int] = []

    def slow(i):
        time.sleep(0.5)
        pulled.append(int(i))
        return i

    ds = tf.data.Dataset.range(1000).map(lambda i: tf.numpy_function(slow, [i], tf.int64))
    probe = pipeline_probe("slow", ds.batch(1), batches=30, warmup=5, chunk=7, time_limit=1.0)
    run = probe()
    assert run.examples == run.batches >= 1
    assert run.batches <= 3, run  # not the chunk of 7
    assert len(pulled) <= 8, pulled  # warm-up cut at the limit (was 5 + 7 = 12 batches)


def test_leading_dim_of_ragged_and_sparse_batches_counts_rows():
    ragged = tf.ragged.constant([[1, 2, 3], [4], [5, 6]])  # 6 flat values, 3 rows
    assert leading_dim(({"tags": ragged}, tf.zeros([3]))) == 3
    sparse = tf.sparse.SparseTensor([[0, 1], [4, 0]], [1, 2], [5, 3])
    assert leading_dim(sparse) == 5


def test_pipeline_probe_counts_rows_of_ragged_and_sparse_batches():
    """Counted from a ragged's flat values (expand_composites), a batch of 8 rows of up to
    4 tags counted as its ~20 values."""
    tags = tf.ragged.constant([[1] * (1 + i % 4) for i in range(64)], dtype=tf.int64)
    ragged = tf.data.Dataset.from_tensor_slices((tags, tf.range(64))).ragged_batch(8)
    m = measure_one(pipeline_probe("r", ragged, batches=4, warmup=1, chunk=4), repeats=1)
    assert (m.runs[0].batches, m.runs[0].examples) == (4, 32)
    sparse = tf.data.Dataset.range(64).map(
        lambda i: tf.sparse.SparseTensor([[0], [2]], [i, i + 1], [5])
    )
    m = measure_one(pipeline_probe("s", sparse.batch(8), batches=4, warmup=1), repeats=1)
    assert (m.runs[0].batches, m.runs[0].examples) == (4, 32)
