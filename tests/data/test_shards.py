"""data/shards.py: pure shard planning checked against exact tables."""

from __future__ import annotations

import pytest

from tfperf.data.shards import (
    RECORD_OVERHEAD,
    ShardPlan,
    ShardSpan,
    parse_size,
    plan_shards,
    records_per_shard,
    shard_name,
    temp_name,
)


@pytest.mark.parametrize(
    ("rows", "per_shard", "bounds"),
    [
        (0, 10, [0, 0]),  # an empty split still has one (empty) shard
        (1, 10, [0, 1]),
        (10, 10, [0, 10]),
        (11, 10, [0, 5, 11]),  # balanced: no 1-row tail shard
        (20, 10, [0, 10, 20]),
        (21, 10, [0, 7, 14, 21]),
        (7, 1, [0, 1, 2, 3, 4, 5, 6, 7]),
        (100, 30, [0, 25, 50, 75, 100]),
        (101, 30, [0, 25, 50, 75, 101]),
        (5, 100, [0, 5]),
    ],
)
def test_plan_shards_table(rows, per_shard, bounds):
    plan = plan_shards(rows, per_shard)
    assert [s.start for s in plan.spans] + [rows] == bounds
    assert plan.num_shards == len(bounds) - 1
    assert all(s.rows <= per_shard for s in plan.spans)
    sizes = [s.rows for s in plan.spans]
    assert max(sizes) - min(sizes) <= 1
    assert plan.to_dict()["bounds"] == bounds


def test_plan_is_deterministic_and_round_trips():
    a, b = plan_shards(12345, 1000), plan_shards(12345, 1000)
    assert a == b
    assert ShardPlan.from_dict(a.to_dict()) == a


@pytest.mark.parametrize(
    ("sizes", "target", "expected"),
    [
        ([84], 1000, 10),  # 84 + 16 framing = 100 bytes per record
        ([84, 84, 84], 1000, 10),
        ([34, 134], 1000, 10),  # mean 84
        ([10_000], 1000, 1),  # a record larger than a shard: one per shard
        ([], 1000, 1),
        ([0], 160, 10),  # an empty Example still costs the framing
    ],
)
def test_records_per_shard_table(sizes, target, expected):
    assert records_per_shard(sizes, target) == expected


def test_records_per_shard_counts_framing():
    assert RECORD_OVERHEAD == 16
    with pytest.raises(ValueError, match="shard_bytes"):
        records_per_shard([10], 0)


def test_names():
    assert shard_name("chess", "train", 3, 64) == "chess-train.tfrecord-00003-of-00064"
    assert temp_name("chess-train.tfrecord-00003-of-00064", 77) == (
        ".chess-train.tfrecord-00003-of-00064.tmp-77"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("128MiB", 128 * 2**20),
        ("64MB", 64 * 10**6),
        ("4096", 4096),
        ("1g", 10**9),
        ("1.5KiB", 1536),
        ("2 kib", 2048),
        (512, 512),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "12 parsecs", "0", "-5MB"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="expected a size"):
        parse_size(text)


def test_plan_validation_rejects_gaps():
    with pytest.raises(ValueError, match="tile"):
        ShardPlan(10, 5, (ShardSpan(0, 0, 5), ShardSpan(1, 6, 10)))
    with pytest.raises(ValueError, match="cover"):
        ShardPlan(10, 5, (ShardSpan(0, 0, 5),))
    with pytest.raises(ValueError, match="records per shard"):
        plan_shards(10, 0)
