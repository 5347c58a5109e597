"""data/corrupt_shards.py on real TFRecord files: a shard scanned to its first bad record, the
corrupt one found among several and named with its record and byte (TensorFlow's own error
names no file), and the records on_corrupt=skip drops each epoch counted per shard."""

from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from tfperf.data.corrupt_shards import (
    CorruptShardError,
    corrupt_shard_error,
    find_corrupt_shard,
    naming_corrupt_shards,
    scan_shard,
    skipped_records,
)
from tfperf.errors import UserError

RECORDS, SIZE = 10, 40  # records per shard, bytes of data per record


def _shards(root: Path, n: int = 3) -> list[str]:
    files = []
    for s in range(n):
        path = root / f"s{s}.tfrecord"
        with tf.io.TFRecordWriter(str(path)) as w:
            for i in range(RECORDS):
                w.write(bytes([s * RECORDS + i]) * SIZE)
        files.append(str(path))
    return files


def _damage(path: str, record: int) -> None:
    data = bytearray(Path(path).read_bytes())
    per = len(data) // RECORDS  # 8 (length) + 4 (its CRC) + SIZE + 4 (data CRC)
    data[record * per + 12 + SIZE // 2] ^= 0xFF  # a data byte: the data CRC fails
    Path(path).write_bytes(bytes(data))


def test_a_shard_is_read_to_its_first_bad_record(tmp_path):
    files = _shards(tmp_path)
    assert (scan_shard(files[0]).readable, scan_shard(files[0]).error) == (RECORDS, None)
    _damage(files[1], 6)
    scan = scan_shard(files[1])
    assert scan.readable == 6 and "corrupted record at" in scan.error
    assert "function_node" not in scan.error and "[Op:" not in scan.error
    assert find_corrupt_shard(files).file == files[1]
    assert find_corrupt_shard([files[0], files[2]]) is None


def test_a_pipelines_data_loss_is_named_with_the_file_record_and_byte(tmp_path):
    files = _shards(tmp_path)
    _damage(files[2], 3)
    ds = tf.data.TFRecordDataset(files)
    with pytest.raises(CorruptShardError) as err, naming_corrupt_shards(files):
        for _ in ds:
            pass
    msg = str(err.value)
    per = 8 + 4 + SIZE + 4
    assert msg.startswith(f"{files[2]}: corrupt TFRecord data at record 3, byte {3 * per}:")
    assert "pipeline.on_corrupt=skip" in msg and isinstance(err.value, UserError)


def test_shards_that_read_cleanly_now_are_said_to_be(tmp_path):
    files = _shards(tmp_path, 2)
    msg = str(corrupt_shard_error(files, cause="corrupted record at 12"))
    assert "reading 2 shard(s) failed a TFRecord check (corrupted record at 12)" in msg
    assert "every shard reads cleanly now" in msg


def test_records_dropped_each_epoch_per_shard(tmp_path):
    files = _shards(tmp_path)
    _damage(files[0], 8)
    assert skipped_records(files, [RECORDS] * 3) == {files[0]: 2}
    # a shard the manifest says holds more than it does: the rest is lost too
    assert skipped_records(files[1:], [RECORDS + 5, RECORDS]) == {files[1]: 5}
    with pytest.raises(ValueError, match="3 files but 2 expected counts"):
        skipped_records(files, [RECORDS] * 2)
