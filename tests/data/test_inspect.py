"""`tfperf inspect` and data/verify.py: the summary, and --verify naming each damaged
shard with the byte offset of its first bad record (plain and GZIP shards)."""

from __future__ import annotations

import gzip
import json
import zlib

import numpy as np
import pytest

from tfperf.data.convert.run import convert
from tfperf.data.manifest import load_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.data.verify import HEADER_BYTES, RecordError, read_records, verify_dir

SCHEMA = Schema.of(
    Feature(name="id", dtype="int64"),
    Feature(name="v", dtype="float32", shape=(4,)),
    Feature(name="s", dtype="bytes"),
)


def make(tmp_path, compression=""):
    rows = [{"id": i, "v": np.full(4, i, np.float32), "s": b"x" * (i % 7)} for i in range(40)]
    root = tmp_path / "ds"
    m = convert(
        rows,
        root,
        schema=SCHEMA,
        shard_bytes=600,
        compression=compression,
        workers=1,
        progress=False,
    )
    assert len(m.splits["train"].shards) >= 3
    return root, m


def offsets(path, compression=""):
    return [(o, len(d)) for o, d in read_records(path, compression)]


def test_inspect_shows_splits_schema_and_an_example(tmp_path, cli):
    root, m = make(tmp_path)
    res = cli("inspect", root)
    assert res.exit_code == 0, res.output
    text = res.stdout  # the report, on stdout
    assert m.splits["train"].shards[0].file in text and "40 records" in text
    assert "float32" in text and "[4]" in text
    res = cli("inspect", root, "--json")
    desc = json.loads(res.stdout)
    tr = desc["splits"]["train"]
    assert tr["records"] == 40 and len(tr["shards"]) == len(m.splits["train"].shards)
    assert tr["example"]["id"] == "int64 0" and tr["example"]["s"] == "b''"
    assert [f["name"] for f in tr["schema"]] == ["id", "v", "s"]
    res = cli("inspect", root, "--split", "nope")
    assert res.exit_code == 2 and "no split 'nope'" in res.stderr


def test_verify_clean_dataset(tmp_path, cli):
    root, m = make(tmp_path)
    res = cli("inspect", root, "--verify", "--json")
    assert res.exit_code == 0, res.output
    v = json.loads(res.stdout)["verify"]
    assert v["ok"] and all(s["records"] > 0 for s in v["shards"])
    assert sum(s["records"] for s in v["shards"]) == 40


def test_truncated_shard_is_named_with_its_offset(tmp_path, cli):
    root, m = make(tmp_path)
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
    root, m = make(tmp_path)
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
    root, m = make(tmp_path)
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
    root, m = make(tmp_path, compression="gzip")
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
    root, m = make(tmp_path, compression="gzip")
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


def test_reports_go_to_stdout_unwrapped_when_piped(tmp_path, cli, monkeypatch):
    # The command line in this process: its stdout and stderr are captured, not a terminal.
    monkeypatch.setenv("COLUMNS", "80")
    deep = tmp_path / ("a folder with a rather long name " * 2).strip() / ("deeper_" * 8)
    root, _ = make(deep)
    np.savez(deep / "d.npz", x=np.arange(5))
    res = cli("inspect", root, "--verify")
    assert res.exit_code == 0, res.stderr
    assert any(str(root) in line for line in res.stdout.splitlines()), res.stdout
    assert "40 records" in res.stdout and "verified" in res.stdout
    assert "records" not in res.stderr
    res = cli("convert", deep / "d.npz", "--out", deep / "c")
    assert res.exit_code == 0, res.stderr
    assert any(f"{deep / 'c'}: split train: 5 records" in ln for ln in res.stdout.splitlines())


def test_float32_values_print_as_float32(tmp_path, cli):
    rows = [{"v": np.float32(0.1), "w": np.array([0.1, 1 / 3], np.float32)}]
    convert(rows, tmp_path / "o", progress=False)
    res = cli("inspect", tmp_path / "o", "--json")
    example = json.loads(res.stdout)["splits"]["train"]["example"]
    assert example["v"] == "float32 0.1", example
    assert example["w"] == "float32[2] [0.1, 0.33333334]", example
