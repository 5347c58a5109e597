"""data/pipeline_sizes.py: the shuffle buffer that fits a RAM budget, records per reader
block, the mean record size (from the manifest's count or sampled), the RAM a cache takes
and its warning, steps per epoch."""

from __future__ import annotations

import pytest
import tensorflow as tf

from tfperf.data.pipeline_sizes import (
    SHUFFLE_OVERHEAD_BYTES,
    cache_bytes,
    plan_shuffle_buffer,
    read_block,
    record_bytes,
    steps_per_epoch,
    warn_if_cache_exceeds_ram,
)


@pytest.mark.parametrize(
    ("requested", "record_bytes", "budget_mb", "granted"),
    [
        (10_000, 194, 1024.0, 10_000),  # the chess workload's buffer of its records fits easily
        (10_000, 824, 1.0, 2**20 // (824 + SHUFFLE_OVERHEAD_BYTES)),  # shrunk to the budget
        (100, 0, 1.0, 100),  # an empty record still costs the overhead
        (5, 2**20 - SHUFFLE_OVERHEAD_BYTES, 1.0, 1),  # exactly one record fits
        (5, 2**20, 1.0, 0),  # not even one: shuffling is off
        (0, 100, 1.0, 0),
    ],
)
def test_plan_shuffle_buffer(requested, record_bytes, budget_mb, granted):
    plan = plan_shuffle_buffer(requested, record_bytes, budget_mb)
    assert plan.granted == granted
    assert plan.requested_bytes == requested * (max(record_bytes, 0) + SHUFFLE_OVERHEAD_BYTES)


def test_cache_bytes_and_the_ram_warning():
    spec = ({"b": tf.TensorSpec([8, 4], tf.float32)}, tf.TensorSpec([8, 1], tf.uint8))
    assert cache_bytes(spec, 10) == 10 * (8 * 4 * 4 + 8)
    assert cache_bytes(tf.TensorSpec([None, 4], tf.float32), 10) is None
    with pytest.warns(UserWarning, match=r"cache_preprocessed: .* GiB of RAM"):
        warn_if_cache_exceeds_ram(spec, 1e15)  # ~10^17 bytes: more than any machine


@pytest.mark.parametrize(
    ("record_bytes", "block"), [(245, 256), (55_000, 19), (2**21, 1), (0, 256)]
)
def test_read_block_is_about_a_megabyte_of_records(record_bytes, block):
    assert read_block(record_bytes) == block


@pytest.mark.parametrize(("shuffle", "block"), [(10_000, 256), (1024, 64), (64, 16), (0, 16)])
def test_read_block_leaves_the_shuffle_buffer_many_blocks(shuffle, block):
    assert read_block(245, shuffle) == block


def test_record_bytes_from_the_count_or_sampled(tmp_path):
    files = []
    for i, n in enumerate((3, 5)):
        path = tmp_path / f"s{i}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as w:
            for _ in range(n):
                w.write(b"x" * 100)  # 100 bytes + 16 of framing each
        files.append(str(path))
    assert record_bytes(files, 8) == 116
    assert record_bytes(files, None) == 116  # sampled from the first file
    assert record_bytes([str(tmp_path / "missing")], 4) == 1  # never 0


def test_steps_per_epoch_drop_the_remainder_but_are_at_least_one():
    assert [steps_per_epoch(n, 32) for n in (100, 96, 10)] == [3, 3, 1]
