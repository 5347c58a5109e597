"""data/verify.py: TFRecord framing read and checked in Python (the bytes TensorFlow writes),
and verify_dir (through `tfperf inspect --verify` too) naming each damaged shard with the
byte offset of its first bad record (plain and GZIP shards), a missing shard and a count
that differs from the manifest's."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib

import pytest
import tensorflow as tf

from tfperf.data.manifest import load_manifest
from tfperf.data.verify import (
    HEADER_BYTES,
    RecordError,
    file_sha256,
    first_record,
    frame,
    index_tfrecord,
    iter_tfrecord,
    read_records,
    scan_file,
    sniff_compression,
    verify_dir,
)

from helpers.convertkit import small_dataset


def offsets(path, compression=""):
    return [(o, len(d)) for o, d in read_records(path, compression)]


def test_verify_clean_dataset(tmp_path, cli):
    root, m = small_dataset(tmp_path)
    res = cli("inspect", root, "--verify", "--json")
    assert res.exit_code == 0, res.output
    v = json.loads(res.stdout)["verify"]
    assert v["ok"] and all(s["records"] > 0 for s in v["shards"])
    assert sum(s["records"] for s in v["shards"]) == 40


def test_truncated_shard_is_named_with_its_offset(tmp_path, cli):
    root, m = small_dataset(tmp_path)
    victim = root / m.splits["train"].shards[1].file
    recs = offsets(victim)
    cut = recs[2][0] + HEADER_BYTES + 3  # inside the third record's data
    victim.write_bytes(victim.read_bytes()[:cut])
    res = cli("inspect", root, "--verify")
    assert res.exit_code == 1
    text = " ".join(res.stdout.split())
    assert f"{victim.name}: first bad record at byte {recs[2][0]};" in text
    assert "truncated record" in text
    report = verify_dir(root)
    (bad,) = report.damaged
    assert bad.file == victim.name and bad.bad_offset == recs[2][0] and bad.records == 2


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        (0, "length crc mismatch"),
        (HEADER_BYTES + 1, "data crc mismatch"),
        (-1, "data crc mismatch"),
        (9, "length crc mismatch"),
    ],
)
def test_flipped_byte_is_named_with_its_record_offset(tmp_path, cli, where, reason):
    root, m = small_dataset(tmp_path)
    victim = root / m.splits["train"].shards[2].file
    recs = offsets(victim)
    start, length = recs[3]
    pos = start + (where if where >= 0 else HEADER_BYTES + length + 4 + where)
    data = bytearray(victim.read_bytes())
    data[pos] ^= 0x10
    victim.write_bytes(bytes(data))
    with pytest.raises(RecordError) as err:
        list(read_records(victim))
    assert err.value.offset == start and reason in err.value.reason
    res = cli("inspect", root, "--verify", "--json")
    assert res.exit_code == 1
    shards = json.loads(res.stdout)["verify"]["shards"]
    bad = [s for s in shards if not s["ok"]]
    assert [(s["file"], s["bad_offset"]) for s in bad] == [(victim.name, start)]
    assert any("sha256 differs" in p for p in bad[0]["problems"])


def test_count_mismatch_and_missing_shard(tmp_path, cli):
    root, m = small_dataset(tmp_path)
    first, second = m.splits["train"].shards[:2]
    (root / second.file).unlink()
    # a valid shard holding fewer records than the manifest says
    recs = offsets(root / first.file)
    (root / first.file).write_bytes((root / first.file).read_bytes()[: recs[-1][0]])
    report = verify_dir(root)
    problems = {s.file: s.problems for s in report.damaged}
    assert problems[second.file] == ["missing file"]
    assert f"expected {first.records} records, found {first.records - 1}" in problems[first.file]
    res = cli("inspect", root, "--verify")
    assert res.exit_code == 1 and "2 of" in res.stdout


def _decompressible(data: bytes) -> int:
    z = zlib.decompressobj(wbits=31)
    try:
        return len(z.decompress(data))
    except zlib.error:
        return 0


def test_gzip_truncation_offset_in_the_decompressed_stream(tmp_path, cli):
    root, m = small_dataset(tmp_path, compression="gzip")
    victim = root / m.splits["train"].shards[0].file
    plain = gzip.decompress(victim.read_bytes())
    recs = offsets(victim, "GZIP")
    assert recs[-1][0] + HEADER_BYTES + recs[-1][1] + 4 == len(plain)
    raw = victim.read_bytes()
    cut = raw[: len(raw) * 2 // 3]
    victim.write_bytes(cut)
    avail = _decompressible(cut)
    expected = next(o for o, n in recs if o + HEADER_BYTES + n + 4 > avail)
    res = cli("inspect", root, "--verify", "--json")
    assert res.exit_code == 1
    v = json.loads(res.stdout)["verify"]
    assert v["offsets"] == "decompressed stream"
    (bad,) = [s for s in v["shards"] if not s["ok"]]
    assert bad["file"] == victim.name and bad["bad_offset"] == expected
    assert "decompressed stream" in bad["problems"][0] and "ends early" in bad["problems"][0]


def test_gzip_flipped_byte_is_named(tmp_path, cli):
    root, m = small_dataset(tmp_path, compression="gzip")
    victim = root / m.splits["train"].shards[1].file
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    res = cli("inspect", root, "--verify")
    assert res.exit_code == 1
    text = " ".join(res.stdout.split())
    assert f"{victim.name}: first bad record at byte" in text
    assert "offsets in the decompressed GZIP stream" in text
    assert load_manifest(root).compression == "GZIP"


def test_frames_are_tensorflows_and_read_back(tmp_path):
    payloads = [b"", b"a", b"x" * 300]
    with tf.io.TFRecordWriter(str(tmp_path / "tf.tfrecord")) as w:
        for p in payloads:
            w.write(p)
    theirs = (tmp_path / "tf.tfrecord").read_bytes()
    assert b"".join(frame(p) for p in payloads) == theirs
    starts = [0, HEADER_BYTES + 4, 2 * (HEADER_BYTES + 4) + 1]
    assert list(read_records(tmp_path / "tf.tfrecord")) == list(zip(starts, payloads, strict=True))
    assert index_tfrecord(str(tmp_path / "tf.tfrecord")) == [
        (s + HEADER_BYTES, len(p)) for s, p in zip(starts, payloads, strict=True)
    ]
    assert first_record(tmp_path / "tf.tfrecord") == b""
    assert scan_file(tmp_path / "tf.tfrecord") == (3, None)
    digest = hashlib.sha256(theirs).hexdigest()
    assert file_sha256(tmp_path / "tf.tfrecord") == (digest, len(theirs))


def test_gzip_files_are_sniffed_and_read_without_their_crcs_checked(tmp_path):
    plain = frame(b"one") + frame(b"two")
    (tmp_path / "g.tfrecord").write_bytes(gzip.compress(plain))
    (tmp_path / "p.tfrecord").write_bytes(plain)
    assert sniff_compression(tmp_path / "g.tfrecord") == "GZIP"
    assert sniff_compression(tmp_path / "p.tfrecord") == ""
    assert list(iter_tfrecord(str(tmp_path / "g.tfrecord"))) == [b"one", b"two"]
    (tmp_path / "cut.tfrecord").write_bytes(plain[:-3])
    with pytest.raises(ValueError, match="cut.tfrecord: bad record at byte 19: truncated record"):
        list(iter_tfrecord(str(tmp_path / "cut.tfrecord")))
    good, err = scan_file(tmp_path / "cut.tfrecord")
    assert good == 1 and err.offset == len(frame(b"one"))
