"""Shard faults found by issue 10: manifest shard names that point outside the dataset
folder are refused by name, and a missing or unreadable shard is a named error before a
pipeline reads (on_corrupt=skip would otherwise spin on it forever)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tfperf.config import config_from_dict
from tfperf.data.convert.run import convert
from tfperf.data.manifest import ManifestError
from tfperf.inputs.datasets import make_input_dataset, split_shards


def _dataset(tmp_path: Path, name: str = "o", rows: int = 40) -> Path:
    np.savez(tmp_path / f"{name}.npz", x=np.arange(rows, dtype=np.int64))
    convert(tmp_path / f"{name}.npz", tmp_path / name, workers=1, progress=False, shard_bytes=200)
    return tmp_path / name


def _cfg(root: Path, on_corrupt: str = "error"):
    return config_from_dict(
        {"data": {"dir": str(root)}, "pipeline": {"on_corrupt": on_corrupt, "batch_size": 4}}
    )


def _point_first_shard_at(root: Path, target: str) -> None:
    path = root / "manifest.json"
    data = json.loads(path.read_text())
    data["splits"]["train"]["shards"][0]["file"] = target
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("target", ["/etc/passwd", "../outside/secret.tfrecord", "a/../b"])
def test_shard_names_outside_the_folder_are_refused(tmp_path, target):
    root = _dataset(tmp_path)
    outside = _dataset(tmp_path, "outside")  # a real TFRecord file a manifest could point at
    shutil.copy(next(outside.glob("o*-train.tfrecord-*")), outside / "secret.tfrecord")
    _point_first_shard_at(root, target)
    with pytest.raises(ManifestError) as err:
        make_input_dataset(_cfg(root), training=False, split="train")
    msg = str(err.value)
    assert "manifest.json" in msg and "split 'train'" in msg and repr(target) in msg
    assert "inside the dataset folder" in msg


def test_a_symlinked_shard_leading_outside_is_refused(tmp_path):
    root = _dataset(tmp_path)
    first = sorted(root.glob("o-train.tfrecord-*"))[0]
    moved = tmp_path / "elsewhere.tfrecord"
    first.rename(moved)
    first.symlink_to(moved)
    with pytest.raises(ManifestError, match="outside the dataset folder"):
        make_input_dataset(_cfg(root), training=False, split="train")


def test_overwrite_never_deletes_a_file_outside_the_folder(tmp_path, cli):
    root = _dataset(tmp_path)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    _point_first_shard_at(root, "../precious.txt")
    res = cli("convert", tmp_path / "o.npz", "--out", root, "--overwrite")
    assert res.exit_code == 2, res.output
    assert "'../precious.txt'" in res.output and "Traceback" not in res.output
    assert victim.read_text() == "keep me"


@pytest.mark.parametrize("on_corrupt", ["error", "skip"])
def test_a_missing_shard_is_named_before_reading(tmp_path, on_corrupt):
    root = _dataset(tmp_path)
    gone = sorted(root.glob("o-train.tfrecord-*"))[1]
    gone.unlink()
    for build in (
        lambda: make_input_dataset(_cfg(root, on_corrupt), training=True),
        lambda: split_shards(_cfg(root, on_corrupt), training=True),
    ):
        with pytest.raises(ManifestError) as err:
            build()
        msg = str(err.value)
        assert f"split 'train': shard {gone.name} listed in manifest.json is missing" in msg
        assert "on_corrupt=skip skips damaged records, not missing files" in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_shard_is_named_before_reading(tmp_path):
    root = _dataset(tmp_path)
    shard = sorted(root.glob("o-train.tfrecord-*"))[0]
    shard.chmod(0)
    try:
        with pytest.raises(ManifestError, match=f"shard {shard.name} .* is unreadable"):
            make_input_dataset(_cfg(root, "skip"), training=False, split="train")
    finally:
        shard.chmod(0o644)


def _cut_after_first_record(shard: Path) -> int:
    """Truncates `shard` right after its first record; returns the records it had."""
    import struct

    data = shard.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    shard.write_bytes(data[: 8 + 4 + length + 4])
    from tfperf.data.corrupt_shards import scan_shard

    assert scan_shard(str(shard)).error is None  # TensorFlow reads it without a word
    return json.loads((shard.parent / "manifest.json").read_text())["splits"]["train"]["shards"][
        sorted(shard.parent.glob("o-train.tfrecord-*")).index(shard)
    ]["records"]


@pytest.mark.parametrize("damage", ["empty", "cut at a record boundary"])
def test_a_short_shard_is_named_under_on_corrupt_error(tmp_path, damage):
    root = _dataset(tmp_path)
    shard = sorted(root.glob("o-train.tfrecord-*"))[2]
    if damage == "empty":
        shard.write_bytes(b"")
    else:
        _cut_after_first_record(shard)
    with pytest.raises(ManifestError) as err:
        make_input_dataset(_cfg(root), training=False, split="train")
    msg = str(err.value)
    assert f"split 'train': shard {shard.name} holds {shard.stat().st_size} bytes" in msg
    assert "pipeline.on_corrupt=skip" in msg


def test_a_short_shard_under_skip_reads_on_and_is_reported(tmp_path):
    from tfperf.inputs.datasets import skipped_per_epoch

    root = _dataset(tmp_path)
    shards = sorted(root.glob("o-train.tfrecord-*"))
    had = _cut_after_first_record(shards[1])
    shards[3].write_bytes(b"")
    lost = (
        had
        - 1
        + json.loads((root / "manifest.json").read_text())["splits"]["train"]["shards"][3][
            "records"
        ]
    )
    cfg = _cfg(root, "skip")
    ds = make_input_dataset(cfg, training=False, split="train")
    assert sum(int(b["x"].shape[0]) for b in ds) == 40 - lost
    assert skipped_per_epoch(cfg, training=True) == lost


def _set_manifest_bytes(root: Path, shard: Path) -> None:
    path = root / "manifest.json"
    data = json.loads(path.read_text())
    for s in data["splits"]["train"]["shards"]:
        if s["file"] == shard.name:
            s["bytes"] = shard.stat().st_size
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_verify_and_training_name_the_same_record_and_offset(tmp_path, cli, compression):
    import gzip

    from tfperf.data.corrupt_shards import CorruptShardError, naming_corrupt_shards
    from tfperf.data.verify import HEADER_BYTES, read_records

    rng = np.random.default_rng(0)
    rows = [{"id": i, "v": rng.random(16).astype(np.float32)} for i in range(400)]
    m = convert(rows, tmp_path / "ds", compression=compression, workers=1, progress=False)
    shard = tmp_path / "ds" / m.splits["train"].shards[0].file
    starts = [o for o, _ in read_records(shard, compression)]
    plain = gzip.decompress(shard.read_bytes()) if compression else shard.read_bytes()
    # Damage a byte inside record 246's data: recompressed for GZIP, so the stream stays
    # valid gzip and only the record's CRC tells.
    bad = bytearray(plain)
    bad[starts[246] + HEADER_BYTES + 3] ^= 0x55
    shard.write_bytes(gzip.compress(bytes(bad), mtime=0) if compression else bytes(bad))
    _set_manifest_bytes(tmp_path / "ds", shard)  # a size change is another check's job
    stream = " of the decompressed GZIP stream" if compression else ""
    want = f"record 246, byte {starts[246]}{stream}"

    res = cli("inspect", tmp_path / "ds", "--verify", "--json")
    (rep,) = json.loads(res.stdout)["verify"]["shards"]
    assert (rep["records"], rep["bad_offset"]) == (246, starts[246]), rep
    cfg = config_from_dict({"data": {"dir": str(tmp_path / "ds")}, "pipeline": {"batch_size": 8}})
    with pytest.raises(CorruptShardError) as err:
        with naming_corrupt_shards([str(shard)], compression):
            for _ in make_input_dataset(cfg, training=False, split="train"):
                pass
    assert want in str(err.value), str(err.value)


def test_a_gzip_shard_damaged_in_its_compressed_bytes_names_the_damaged_record(tmp_path, cli):
    rng = np.random.default_rng(0)
    rows = [{"id": i, "v": rng.random(16).astype(np.float32)} for i in range(400)]
    m = convert(rows, tmp_path / "ds", compression="GZIP", workers=1, progress=False)
    shard = tmp_path / "ds" / m.splits["train"].shards[0].file
    data = bytearray(shard.read_bytes())
    data[int(len(data) * 0.6)] ^= 0x55  # 60% into the file: far past record 0
    shard.write_bytes(bytes(data))
    res = cli("inspect", tmp_path / "ds", "--verify", "--json")
    (rep,) = json.loads(res.stdout)["verify"]["shards"]
    assert rep["records"] > 100 and rep["bad_offset"] > 0, rep
