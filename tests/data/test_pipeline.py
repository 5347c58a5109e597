"""data/pipeline.py on tiny real shards: order and determinism, shuffling and repeat,
batched vs per-example parsing, the shuffle RAM budget applied, corrupt shards, sharding
across input pipelines and every stop_after prefix. The sizes themselves:
test_pipeline_sizes.py."""

from __future__ import annotations

import os
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import PipelineConfig
from tfperf.data.corrupt_shards import (
    CorruptShardError,
    naming_corrupt_shards,
    scan_shard,
    skipped_records,
)
from tfperf.data.pipeline import STAGES, make_dataset
from tfperf.data.pipeline_sizes import (
    SHUFFLE_OVERHEAD_BYTES,
    PipelineError,
)
from tfperf.data.schema import Feature, Schema
from tfperf.errors import UserError

SCHEMA = Schema.of(
    Feature(name="id", dtype="int64"),
    Feature(name="x", dtype="float32", shape=(3,)),
    Feature(name="img", dtype="uint8", shape=(2, 2)),
)
PER_SHARD = 50


def write_shards(root: Path, shards: int = 4, per_shard: int = PER_SHARD) -> list[str]:
    """Shards of records whose 'id' runs 0..shards*per_shard-1 in file order."""
    files, n = [], 0
    for s in range(shards):
        path = root / f"train.tfrecord-{s:05d}-of-{shards:05d}"
        with tf.io.TFRecordWriter(str(path)) as w:
            for _ in range(per_shard):
                row = {"id": n, "x": [n, n + 0.5, -n], "img": np.full((2, 2), n % 256, np.uint8)}
                w.write(SCHEMA.encode(row))
                n += 1
        files.append(str(path))
    return files


def corrupt(path: str, record: int) -> None:
    """Flips a payload byte of record `record` (its CRC then fails)."""
    data = bytearray(Path(path).read_bytes())
    size = len(data) // PER_SHARD  # every record has the same size here
    data[record * size + size // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def ids_of(ds, limit: int | None = None) -> list[int]:
    """Record ids in output order from a dataset of parsed batches or (features, label)."""
    out: list[int] = []
    for batch in ds if limit is None else ds.take(limit):
        feats = batch[0] if isinstance(batch, tuple) else batch
        out += feats["id"].numpy().reshape(-1).tolist()
    return out


def split_id(batch):
    return {k: v for k, v in batch.items() if k != "id"} | {"id": batch["id"]}, batch["id"]


def build(files, training: bool, **opts):
    return make_dataset(
        files,
        PipelineConfig(**({"batch_size": 8} | opts)),
        training=training,
        parse=SCHEMA.parse_batch,
        parse_one=SCHEMA.parse_one,
        preprocess=split_id,
        records=len(files) * PER_SHARD,
    )


# ---- order, determinism, shuffling -----------------------------------------------------


def test_evaluation_is_deterministic_and_reads_each_record_once(tmp_path):
    files = write_shards(tmp_path)
    first = ids_of(build(files, training=False, seed=3))
    second = ids_of(build(files, training=False, seed=3))
    assert first == second
    assert sorted(first) == list(range(4 * PER_SHARD))  # one epoch, nothing dropped
    # Interleaving 4 files one record at a time: the golden order of the first records.
    assert first[:8] == [0, 50, 100, 150, 1, 51, 101, 151]


def test_training_repeats_and_reshuffles_each_epoch(tmp_path):
    files = write_shards(tmp_path)
    n = 4 * PER_SHARD
    # deterministic: the parallel batch may otherwise emit a batch of epoch 2 before the
    # last of epoch 1, and this test checks where epochs end.
    ids = ids_of(
        build(files, training=True, seed=7, shuffle_buffer=64, deterministic=True), limit=2 * n // 8
    )
    epoch1, epoch2 = ids[:n], ids[n:]
    # Repeat sits after shuffle: each epoch is a whole permutation of the records.
    assert sorted(epoch1) == sorted(epoch2) == list(range(n))
    assert epoch1 != sorted(epoch1)  # shuffled
    assert epoch1 != epoch2  # a new order every epoch


def test_training_with_seed_and_deterministic_repeats_the_same_order(tmp_path):
    files = write_shards(tmp_path)
    a = ids_of(build(files, training=True, seed=11, deterministic=True), limit=30)
    b = ids_of(build(files, training=True, seed=11, deterministic=True), limit=30)
    c = ids_of(build(files, training=True, seed=12, deterministic=True), limit=30)
    assert a == b
    assert a != c


def test_batched_parse_equals_per_example_parse(tmp_path):
    files = write_shards(tmp_path, shards=2)

    def rows(parse_mode: str) -> list[tuple]:
        opts = PipelineConfig(batch_size=16, parse=parse_mode)
        ds = make_dataset(
            files, opts, training=False, parse=SCHEMA.parse_batch, parse_one=SCHEMA.parse_one
        )
        out = []
        for b in ds:
            assert b["img"].dtype == tf.uint8 and b["img"].shape[1:] == (2, 2)
            for i in range(b["id"].shape[0]):
                out.append(
                    (
                        int(b["id"][i]),
                        tuple(b["x"][i].numpy()),
                        tuple(b["img"][i].numpy().reshape(-1)),
                    )
                )
        return out

    batched, per_example = rows("batched"), rows("per_example")
    assert len(batched) == 2 * PER_SHARD
    assert Counter(batched) == Counter(per_example)
    assert batched[3] == (51, (51.0, 51.5, -51.0), (51, 51, 51, 51))


# ---- the shuffle RAM budget -------------------------------------------------------------


def test_shuffle_over_budget_warns_with_sizes_and_shrinks_the_buffer(tmp_path):
    files = write_shards(tmp_path, shards=1)
    record_bytes = os.path.getsize(files[0]) // PER_SHARD
    per = record_bytes + SHUFFLE_OVERHEAD_BYTES
    budget_mb = 4.5 * per / 2**20  # room for 4 records
    with pytest.warns(UserWarning) as caught:
        ds = build(
            files,
            training=True,
            seed=1,
            deterministic=True,
            shuffle_buffer=1000,
            shuffle_ram_mb=budget_mb,
            repeat=False,
            batch_size=5,
        )
    msg = str(caught[0].message)
    assert "pipeline.shuffle_buffer: 1000 records" in msg
    assert f"~{1000 * per / 2**20:.3g} MiB" in msg and f"({budget_mb:.3g} MiB)" in msg
    assert "pipeline.shuffle_ram_mb" in msg and "using 4 records" in msg
    ids = ids_of(ds)
    assert sorted(ids) == list(range(PER_SHARD))
    assert ids != sorted(ids)
    # A buffer of 4 can only emit, at position i, one of the first i + 4 records.
    assert max(r - i for i, r in enumerate(ids)) <= 3


# ---- corrupt shards ---------------------------------------------------------------------


def test_corrupt_shard_error_names_the_file(tmp_path):
    files = write_shards(tmp_path)
    corrupt(files[2], record=10)
    ds = build(files, training=False, on_corrupt="error")
    with pytest.raises(tf.errors.DataLossError):  # TensorFlow alone does not name it
        ids_of(ds)
    with pytest.raises(CorruptShardError) as err, naming_corrupt_shards(files):
        ids_of(ds)
    assert isinstance(err.value, UserError)
    msg = str(err.value)
    assert files[2] in msg
    assert "at record 10, byte " in msg and "corrupted record at" in msg
    assert "pipeline.on_corrupt=skip" in msg
    assert scan_shard(files[1]).error is None and scan_shard(files[1]).readable == PER_SHARD


def test_corrupt_shard_skip_drops_the_rest_of_the_shard_and_counts_it(tmp_path):
    files = write_shards(tmp_path)
    corrupt(files[1], record=20)
    ids = ids_of(build(files, training=False, on_corrupt="skip"))
    expected = [i for i in range(4 * PER_SHARD) if not 70 <= i < 100]
    assert sorted(ids) == expected
    # The per-epoch count: records the manifest promises minus the records read.
    skipped = skipped_records(files, [PER_SHARD] * 4)
    assert skipped == {files[1]: 30}
    assert sum(skipped.values()) == 4 * PER_SHARD - len(ids)
    # Training keeps going epoch after epoch and drops the same records each time.
    train = ids_of(build(files, training=True, seed=0, on_corrupt="skip"), limit=2 * 170 // 8)
    assert set(train) == set(expected)


# ---- sharding across input pipelines ----------------------------------------------------


@pytest.mark.parametrize("shards", [4, 1])  # by file, and by record when files are too few
def test_input_context_gives_disjoint_record_sets(tmp_path, shards):
    files = write_shards(tmp_path, shards=shards)
    parts = []
    for pid in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pid)
        ds = make_dataset(
            files,
            PipelineConfig(batch_size=5),
            training=False,
            parse=SCHEMA.parse_batch,
            input_context=ctx,
        )
        parts.append(ids_of(ds))
    a, b = set(parts[0]), set(parts[1])
    assert a and b and not a & b
    assert sorted(a | b) == list(range(shards * PER_SHARD))


# ---- stop_after -------------------------------------------------------------------------


def _spec_kind(spec) -> str:
    if isinstance(spec, tuple):
        return "pair"
    if isinstance(spec, dict):
        return "dict" if spec["id"].shape.rank == 1 else "example"
    return "records" if spec.shape.rank == 0 else "batch"


@pytest.mark.parametrize(
    ("stage", "kind"),
    [
        ("read", "records"),
        ("cache_records", "records"),
        ("shuffle", "records"),
        ("repeat", "records"),
        ("batch", "batch"),
        ("parse", "dict"),
        ("preprocess", "pair"),
        ("cache", "pair"),
        ("prefetch", "pair"),
    ],
)
def test_stop_after_each_stage(tmp_path, stage, kind):
    files = write_shards(tmp_path, shards=2)
    ds = make_dataset(
        files,
        PipelineConfig(batch_size=8, cache_records=True, cache_preprocessed=True, seed=0),
        training=True,
        parse=SCHEMA.parse_batch,
        preprocess=split_id,
        stop_after=stage,
    )
    assert _spec_kind(ds.element_spec) == kind
    first = next(iter(ds))  # it runs, and yields what the spec says
    if kind == "records":
        assert SCHEMA.decode_numpy(first.numpy())["id"] < 2 * PER_SHARD
    elif kind == "batch":
        assert first.shape == (8,)
    if stage in ("read", "cache_records"):  # before repeat: one epoch of every record
        assert ds.reduce(0, lambda n, _: n + 1).numpy() == 2 * PER_SHARD
    assert STAGES.index(stage) >= 0


def test_stop_after_in_per_example_mode_gives_unbatched_examples(tmp_path):
    files = write_shards(tmp_path, shards=1)
    opts = PipelineConfig(batch_size=8, parse="per_example")
    ds = make_dataset(
        files,
        opts,
        training=False,
        parse=SCHEMA.parse_batch,
        parse_one=SCHEMA.parse_one,
        stop_after="parse",
    )
    assert _spec_kind(ds.element_spec) == "example"
    assert [int(e["id"]) for e in ds.take(3)] == [0, 1, 2]


def test_stop_after_unknown_stage_names_the_choices(tmp_path):
    files = write_shards(tmp_path, shards=1)
    with pytest.raises(PipelineError, match=r"stop_after: expected one of .*'prefetch'.*found 'x'"):
        make_dataset(
            files, PipelineConfig(), training=False, parse=SCHEMA.parse_batch, stop_after="x"
        )


def test_shuffle_budget_without_a_record_count_samples_the_record_size(tmp_path):
    files = write_shards(tmp_path, shards=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 10000 small records fit in 1 GiB: no warning
        make_dataset(
            files,
            PipelineConfig(shuffle_buffer=10_000),
            training=True,
            parse=SCHEMA.parse_batch,
            stop_after="shuffle",
        )
    record_bytes = os.path.getsize(files[0]) // PER_SHARD
    tight = 100 * (record_bytes + SHUFFLE_OVERHEAD_BYTES) / 2**20
    with pytest.warns(UserWarning, match="using (99|100) records"):
        make_dataset(
            files,
            PipelineConfig(shuffle_buffer=10_000, shuffle_ram_mb=tight),
            training=True,
            parse=SCHEMA.parse_batch,
            stop_after="shuffle",
        )


def test_cache_preprocessed_in_training_replays_the_first_epoch(tmp_path):
    # The repeat comes after the cache: epoch 1 fills it, later epochs replay the same
    # batches (reordered). A repeat before the cache would fill it forever, never replay.
    files = write_shards(tmp_path, shards=2)
    opts = PipelineConfig(batch_size=8, shuffle_buffer=100, cache_preprocessed=True, seed=3)
    ds = make_dataset(files, opts, training=True, parse=SCHEMA.parse_batch)
    per_epoch = 2 * PER_SHARD // 8
    batches = [frozenset(b["id"].numpy().tolist()) for b in ds.take(3 * per_epoch)]
    epochs = [set(batches[i * per_epoch : (i + 1) * per_epoch]) for i in range(3)]
    assert len(epochs[0]) == per_epoch
    assert epochs[0] == epochs[1] == epochs[2]
    # Batches keep their static size (drop_remainder), raw-bytes features included.
    assert ds.element_spec["img"].shape == (8, 2, 2)
    assert ds.element_spec["id"].shape == (8,)


def test_a_small_shuffle_buffer_still_mixes_shards(tmp_path):
    # Tiny records: ~1 MB blocks would be whole shards, and a buffer of 32 would then hand
    # out one shard's records for 256 examples at a time. Judged over the whole epoch: which
    # reader thread starts first is up to the scheduler, so the first batches may not mix.
    files = write_shards(tmp_path, shards=4, per_shard=256)
    opts = PipelineConfig(batch_size=8, shuffle_buffer=32, repeat=False, seed=3)
    ds = make_dataset(files, opts, training=True, parse=SCHEMA.parse_batch, records=1024)
    ids = ids_of(ds)
    assert sorted(ids) == list(range(1024))
    windows = [ids[i : i + 64] for i in range(0, 1024, 64)]
    shards_per_window = sorted(len({i // 256 for i in w}) for w in windows)
    # Whole-shard blocks give one shard in most windows of 64 examples.
    assert shards_per_window[len(windows) // 2] >= 3, shards_per_window


def test_training_reads_in_blocks_and_yields_every_record_once(tmp_path):
    files = write_shards(tmp_path, shards=3, per_shard=40)
    opts = PipelineConfig(batch_size=8, shuffle_buffer=0, repeat=False)
    ds = make_dataset(files, opts, training=True, parse=SCHEMA.parse_batch, records=120)
    assert sorted(ids_of(ds)) == list(range(120))
