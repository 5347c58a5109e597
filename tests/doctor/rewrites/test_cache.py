"""--fix's cache (doctor/rewrites/cache.py): a pipeline that shuffles its file names first
(as list_files does) and decodes each file gets the decode cached and the shuffle moved
after the cache; real files, read once."""

from __future__ import annotations

import collections
from typing import Any

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.cache import (
    cache_work,
    cacheable_prefix,
    filled_repeat,
    source_shuffle,
    tf_len,
)

from helpers.doctorkit import FILES, decode, epoch, files_pipeline, write_files


def test_the_decode_is_cached_and_the_shuffle_moves_after_it(tmp_path):
    paths = write_files(tmp_path)
    ds = files_pipeline(paths)
    graph = lint.read_graph(ds)
    assert source_shuffle(graph) is not None
    assert [s.kind for s in cacheable_prefix(graph)] == ["source", "shuffle", "map"]
    fixed = cache_work(graph, ds, budget=2**20)
    assert fixed is not None
    kinds = [s.kind for s in lint.read_graph(fixed).stages if s.kind != "options"]
    assert kinds[:4] == ["source", "map", "cache", "shuffle"] and "batch" in kinds
    first = epoch(fixed)
    assert collections.Counter(first) == collections.Counter(epoch(ds))
    for p in paths:  # read once: the next epochs come from the cache
        (tmp_path / p).unlink()
    second, third = epoch(fixed), epoch(fixed)
    assert sorted(second) == sorted(first) == sorted(third)
    assert first != second or second != third  # still reshuffled each epoch


def test_a_partial_source_shuffle_becomes_a_full_one_after_the_cache(tmp_path):
    # image_dataset_from_directory shuffles its paths with a buffer of batch_size * 8
    paths = write_files(tmp_path)
    partial = files_pipeline(paths, buffer=5)
    fixed = cache_work(lint.read_graph(partial), partial, budget=2**20)
    assert fixed is not None
    shuffle = next(s for s in lint.read_graph(fixed).stages if s.kind == "shuffle")
    assert shuffle.buffer_size == FILES  # every path, not 5
    assert collections.Counter(epoch(fixed)) == collections.Counter(epoch(partial))


def test_a_small_budget_is_left_alone(tmp_path):
    paths = write_files(tmp_path)
    ds = files_pipeline(paths)
    assert cache_work(lint.read_graph(ds), ds, budget=100) is None  # 20 x 16 B > 100 B


def _records(tmp_path, n: int = 300) -> list[str]:
    """Two TFRecord files of `n` serialized int64 tensors: a source of unknown cardinality."""
    import tensorflow as tf

    paths = [str(tmp_path / f"r{i}.tfrecord") for i in range(2)]
    for i, p in enumerate(paths):
        with tf.io.TFRecordWriter(p) as w:
            for k in range(i, n, 2):
                w.write(tf.io.serialize_tensor(tf.constant(k, tf.int64)).numpy())
    return paths


def test_a_cache_of_records_moves_after_their_parse_and_the_records_are_counted(tmp_path):
    import tensorflow as tf

    from tfperf.doctor.rewrites.cache import early_caches, element_count

    def parse(record):
        return tf.io.parse_tensor(record, tf.int64) * 2

    files = tf.data.TFRecordDataset(_records(tmp_path), num_parallel_reads=2)
    ds = files.cache().shuffle(60_000).map(parse, num_parallel_calls=2).batch(16)
    graph = lint.read_graph(ds)
    assert lint.known_cardinality(ds) is None  # records: tf.data does not know how many
    assert element_count(graph, graph.stages[1]) == 300  # counted in one pass
    assert [s.kind for s in early_caches(graph)] == ["cache"]
    fixed = cache_work(graph, ds, budget=2**20)
    assert fixed is not None
    kinds = [s.kind for s in lint.read_graph(fixed).stages if s.kind != "options"]
    assert kinds.count("cache") == 1 and kinds.index("map") < kinds.index("cache"), kinds
    shuffle = next(s for s in lint.read_graph(fixed).stages if s.kind == "shuffle")
    assert shuffle.buffer_size == 300  # a full shuffle of the counted elements
    got = sorted(int(v) for b in fixed for v in b.numpy())
    assert got == sorted(int(v) for b in ds for v in b.numpy()) == list(range(0, 600, 2))


def test_a_source_too_large_to_count_in_time_stays_unknown(tmp_path, monkeypatch):
    import tensorflow as tf

    from tfperf.doctor.rewrites import cache

    monkeypatch.setattr(cache, "COUNT_SECONDS", 0.0)  # any pass takes longer than this
    ds = tf.data.TFRecordDataset(_records(tmp_path)).shuffle(10).map(lambda r: r)
    graph = lint.read_graph(ds)
    assert cache.element_count(graph, graph.stages[1]) is None  # the records
    assert source_shuffle(graph) is None  # no full shuffle of an unknown number


def test_a_count_of_slow_elements_stops_near_its_deadline(monkeypatch):
    """Issue 30 §4: the count read its deadline only between batches of 4,096 elements, and
    on a packing pipeline one such batch took 95 s of a 120 s budget. Its batches are now
    sized by the elements' rate: 1,000 elements of 5 ms each (5 s per 1,000) stop near the
    0.5 s deadline."""
    import time

    import tensorflow as tf

    from tfperf.doctor.rewrites import cache

    monkeypatch.setattr(cache, "COUNT_SECONDS", 0.5)

    def slow(x: tf.Tensor) -> tf.Tensor:
        return tf.py_function(lambda v: (time.sleep(0.005), v)[1], [x], tf.int64)

    ds = tf.data.Dataset.range(1000).map(slow).filter(lambda x: True)  # count unknown
    graph = lint.read_graph(ds)
    start = time.monotonic()
    assert cache.element_count(graph, graph.stages[-1]) is None
    took = time.monotonic() - start
    assert took < 4.0, took  # a batch of 1,000 flags would take 5 s


def test_examples_of_varying_length_are_counted_without_stacking_them():
    """A filter hides the count from tf.data; its elements (variable-length sequences from
    a ragged source, before a padded_batch) were counted in batches of 4,096 that could not
    stack them: "Cannot batch tensors with different shapes" stopped optimize (issue 30)."""
    import tensorflow as tf

    from tfperf.doctor.rewrites.cache import element_count

    seqs = tf.ragged.constant([[1] * (1 + i % 7) for i in range(90)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices(seqs).map(lambda s: s)
    ds = ds.filter(lambda s: tf.size(s) > 1)
    ds = ds.padded_batch(8)
    graph = lint.read_graph(ds)
    kept = next(st for st in graph.stages if st.kind == "filter")
    assert element_count(graph, kept) == 90 - 13  # the 13 of length 1 are dropped


def test_a_padded_batch_after_the_cache_is_applied_again_as_a_padded_batch():
    """Applied again as a plain batch, examples of different lengths could not stack:
    "cache the deterministic prefix: not kept (InvalidArgumentError: Cannot batch tensors
    with different shapes)" on every padded_batch pipeline."""
    import tensorflow as tf

    tags = tf.ragged.constant([[i % 5 + 1] * (1 + i % 4) for i in range(50)], dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((tags, tf.range(50))).map(lambda t, y: (t * 2, y))
    ds = ds.padded_batch(8, padding_values=(tf.constant(-1, tf.int64), 0), drop_remainder=True)
    ds = ds.prefetch(2)
    cached = cache_work(lint.read_graph(ds), ds, budget=2**30)
    assert cached is not None
    got, want = list(cached.as_numpy_iterator()), list(ds.as_numpy_iterator())
    assert len(got) == len(want) == 6  # the last 2 of 50 dropped, as in the original
    for (t, y), (t0, y0) in zip(got, want, strict=True):
        assert t.tolist() == t0.tolist() and y.tolist() == y0.tolist()
    assert (got[0][0] == -1).any()  # padded with the user's value, not 0


def clips(n: int = 48, samples: int = 16000) -> Any:
    """A shuffled set of audio clips, each turned into framed log-mel examples and unbatched,
    as an audio-tagging pipeline reads them: an stft per clip, every epoch."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    audio = rng.standard_normal((n, samples)).astype(np.float32)
    labels = rng.integers(0, 10, n)
    mel = tf.signal.linear_to_mel_weight_matrix(64, 513, 16000, 125.0, 7500.0)

    def log_mel(clip: Any, label: Any) -> Any:
        spec = tf.abs(tf.signal.stft(clip, 400, 20, 1024))
        frames = tf.signal.frame(tf.math.log(tf.matmul(spec, mel) + 1e-3), 25, 12, axis=0)
        return frames, tf.fill([tf.shape(frames)[0]], label)

    ds = tf.data.Dataset.from_tensor_slices((audio, labels)).shuffle(n)
    ds = ds.map(log_mel, num_parallel_calls=2).unbatch().shuffle(500)
    return ds.batch(32).prefetch(2)


def test_a_cache_slow_to_fill_is_timed_on_its_first_elements_and_the_unbatch_applied_again():
    from tfperf.testing import assert_same_examples

    # 24 clips: more than the fill's first pull (PROBE_BATCH, 16), whose stfts alone take far
    # longer than 0.01 s
    ds = clips(24)
    fixed = cache_work(lint.read_graph(ds), ds, budget=2**30, sample_seconds=0.01)
    assert fixed is not None
    kinds = [s.kind for s in lint.read_graph(fixed).stages if s.kind != "options"]
    # (unbatch adds a map of its own, each time it is applied)
    assert kinds[:4] == ["source", "map", "map", "cache"] and kinds[4] == "shuffle"
    assert kinds[-4:] == ["unbatch", "shuffle", "batch", "prefetch"]
    assert_same_examples(ds, fixed)  # the whole epoch: every clip cached
    timed = fixed.doctor_timed
    made = int(fixed.doctor_note.split("first ")[1].split(" of")[0])
    assert f"timed with its first {made} of 24 elements cached" in fixed.doctor_note
    # The row says the RAM the cache spends, against its budget.
    assert fixed.doctor_note.startswith("holds 24 elements in RAM, ~")
    assert "MiB (budget 1,024 MiB)" in fixed.doctor_note
    assert "shuffle#1 (buffer=24) moves after it, over all 24" in fixed.doctor_note
    assert 0 < made < 24
    per_clip = sum(int(tf_len(b)) for b in ds) // 24
    assert sum(int(tf_len(b)) for b in timed) == made * per_clip  # its first clips only
    # Without a sample time (a replay), or where the whole fill is quick: no sample.
    assert not hasattr(cache_work(lint.read_graph(ds), ds, budget=2**30), "doctor_timed")
    assert not hasattr(cache_work(lint.read_graph(ds), ds, 2**30, 60.0), "doctor_timed")


def test_fix_keeps_a_cache_timed_on_a_sample_and_returns_the_whole_cache(monkeypatch):
    import tfperf
    from tfperf.doctor.fix import candidates
    from tfperf.testing import assert_same_examples

    monkeypatch.setattr(candidates, "FILL_SECONDS", 0.05)  # the 48 clips' fill takes longer
    ds = clips()
    fast = ["doctor.steps=4", "doctor.warmup=2", "doctor.repeats=2", "doctor.what_ifs=[]"]
    fast += ["doctor.min_seconds=0.05"]
    # Beside two CPU hogs 15 s left the cache "not measured": the diagnosis took the budget.
    fixed, report = tfperf.optimize(ds, None, overrides=fast, budget_s=40)
    row = next(t for t in report.fix.trials if t.name == "cache the deterministic prefix")
    assert row.kept, row
    assert "timed with its first" in row.reason and "of 48 elements cached" in row.reason
    assert_same_examples(ds, fixed)  # every clip, not the sample the trial timed
    # The trials timed a shuffle(128) in place of the shuffle(500): the user's is kept.
    buffers = [s.buffer_size for s in lint.read_graph(fixed).stages if s.kind == "shuffle"]
    assert buffers == [48, 500], buffers


def _augmented(paths: list[str]) -> Any:
    """Each file read and decoded in order, then a random augment: the deterministic prefix
    ends at the decode, and a map follows it."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices(paths).map(decode)
    noise = lambda: tf.random.uniform([], 0, 2, tf.int64)  # noqa: E731
    ds = ds.map(lambda x: x + tf.stack([tf.constant(0, tf.int64), noise()]))  # to i*i only
    return ds.shuffle(8).batch(4)


def test_a_random_map_after_the_prefix_reads_a_cache_spliced_before_it(tmp_path):
    # Only batch, shuffle, prefetch, repeat could follow the cache before: a random augment
    # after the decode left --fix's own top finding "not applicable".
    paths = write_files(tmp_path)
    ds = _augmented(paths)
    fixed = cache_work(lint.read_graph(ds), ds, budget=2**20)
    assert fixed is not None and f"holds {FILES} elements" in fixed.doctor_note
    kinds = [s.kind for s in lint.read_graph(fixed).stages if s.kind != "options"]
    assert kinds == ["source", "map", "cache", "map", "shuffle", "batch"]
    first = epoch(fixed)
    assert sorted(i for i, _ in first) == sorted(i for i, _ in epoch(ds))
    assert all(sq - i * i in (0, 1) for i, sq in first)  # decoded, then augmented by 0 or 1
    for p in paths:  # read once: the next epoch comes from the cache, augmented again
        (tmp_path / p).unlink()
    assert len(epoch(fixed)) == FILES


def test_a_trials_repeat_is_filled_once_and_runs_shorter_than_an_epoch_read_the_cache(tmp_path):
    # tf.data discards a cache whose first epoch an iterator left unfinished, and each timed
    # repeat is an iterator of its own: unfilled, each run shorter than an epoch reads again.
    paths = write_files(tmp_path)
    fixed = cache_work(lint.read_graph(_augmented(paths)), _augmented(paths), budget=2**20)
    assert fixed is not None
    # A pass of unknown length (a filter) is counted on a copy first, then filled the same way.
    unknown = fixed.unbatch().filter(lambda x: x[0] >= 0).batch(4)
    assert lint.known_cardinality(fixed) == FILES // 4
    assert lint.known_cardinality(unknown) is None
    looped, looped_unknown = filled_repeat(fixed), filled_repeat(unknown)
    assert filled_repeat(fixed) is looped  # remembered: one pass per dataset
    for p in paths:  # every later read comes from the caches the fill completed
        (tmp_path / p).unlink()
    for loop in (looped, looped_unknown):
        for _ in range(3):  # runs of half an epoch, each its own iterator
            it = iter(loop)
            rows = [next(it) for _ in range(FILES // 8)]
            del it
            assert all(int(tf_len(b)) == 4 for b in rows)
