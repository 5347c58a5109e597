"""--fix's cache (doctor/rewrites/cache.py): a pipeline that shuffles its file names first
(as list_files does) and decodes each file gets the decode cached and the shuffle moved
after the cache; real files, read once."""

from __future__ import annotations

import collections

from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.cache import cache_work, cacheable_prefix, source_shuffle

from helpers.doctorkit import FILES, epoch, files_pipeline, write_files


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
    assert cache_work(lint.read_graph(ds), ds, budget=100) is None  # 20 x 16 B x 2 > 100 B
