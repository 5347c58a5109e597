"""data/convert/disk.py: the one error of a full disk and its estimate of what the rest
needs (from the finished shards, else the plan). A full disk during `convert` (a real tmpfs
that fills up midway): one error naming the output folder, its free space and about what the
rest needs, exit 2, no traceback, no partial shard left; once space is freed `--resume`
completes byte-identical shards."""

from __future__ import annotations

import re
import shutil

import numpy as np

from tfperf.data.convert.disk import convert_disk_full
from tfperf.data.convert.resume import Progress
from tfperf.data.convert.run import convert
from tfperf.data.shards import plan_shards
from tfperf.data.verify import verify_dir
from tfperf.util.disk import DiskFullError

ROWS = 3000
ARGS = ["--shard-size", "16KiB", "--workers", "2", "--quiet"]


def test_full_disk_is_one_error_and_resume_completes_once_freed(tmp_path, cli, tmpfs, monkeypatch):
    # The command line in this process (its workers are processes), from the data's folder.
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((ROWS, 16)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x, id=np.arange(ROWS))
    out = tmpfs("o", "1m")
    # ~420 KiB of shards; about a third fits beside the filler.
    filler = out / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(out).free - 160 * 1024))
    proc = cli("convert", "d.npz", *ARGS, "--out", out)
    assert proc.exit_code == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 1, proc.stderr
    text = " ".join(proc.stderr.split())
    assert f"the disk holding {out} is full (" in text, text
    assert "KiB free of 1.0 MiB" in text and "No space left on device" in text, text
    assert "not yet written need about" in text and "--resume" in text, text
    left = sorted(p.name for p in out.iterdir())
    assert not [n for n in left if ".tmp-" in n], left  # no partial shard or temp file
    finished = [n for n in left if ".tfrecord-" in n]
    assert finished, left  # some shards made it before the disk filled
    kept = re.search(r"\((\d+) finished shard\(s\) are kept\)", text)
    # A worker may finish a shard the main process no longer records: --resume redoes it.
    assert kept and 0 < int(kept.group(1)) <= len(finished), text

    filler.unlink()  # space freed
    res = cli("convert", "d.npz", *ARGS, "--out", out, "--resume")
    assert res.exit_code == 0, res.stderr
    ref = convert(tmp_path / "d.npz", tmp_path / "ref", shard_bytes=16 * 1024, progress=False)
    assert len(ref.splits["train"].shards) > len(finished)
    got = {p.name: p.read_bytes() for p in out.glob("d-train.tfrecord-*")}
    want = {p.name: p.read_bytes() for p in (tmp_path / "ref").glob("d-train.tfrecord-*")}
    assert got == want
    assert verify_dir(out).ok
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def _progress(tmp_path, finished: dict[int, dict]) -> Progress:
    plan = plan_shards(1000, 250)  # 4 shards of 250 records
    return Progress(tmp_path / "p.json", {}, plan, finished)


def test_the_message_estimates_what_is_left_from_the_finished_shards(tmp_path):
    done = {0: {"records": 250, "bytes": 250 * 400}}  # 400 bytes per record, measured
    text = str(convert_disk_full(tmp_path, "train", _progress(tmp_path, done), 1 << 20))
    assert text.startswith(f"convert into {tmp_path} (split 'train'): the disk holding")
    assert "No space left on device" in text and " free of " in text
    assert "the 3 shard(s) not yet written need about 293.0 KiB more (750 records at" in text
    assert "~400 bytes)" in text and "(1 finished shard(s) are kept)" in text


def test_before_any_shard_the_plan_estimates_and_after_all_only_the_manifest(tmp_path):
    text = str(convert_disk_full(tmp_path, "eval", _progress(tmp_path, {}), 250 * 100))
    assert "the 4 shard(s) not yet written need about 97.7 KiB more (1,000 records" in text
    done = {i: {"records": 250, "bytes": 1000} for i in range(4)}
    text = str(convert_disk_full(tmp_path, "eval", _progress(tmp_path, done), 1))
    assert "every shard is written; manifest.json and the rejects file need a few KiB" in text
    assert isinstance(convert_disk_full(tmp_path, "x", _progress(tmp_path, {}), 1), DiskFullError)
