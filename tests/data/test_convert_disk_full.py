"""A full disk during `convert` (a real tmpfs that fills up midway): one error naming the
output folder, its free space and about what the rest needs, exit 2, no traceback, no
partial shard left; once space is freed `--resume` completes byte-identical shards."""

from __future__ import annotations

import re
import shutil

import numpy as np

from tfperf.data.convert.run import convert
from tfperf.data.verify import verify_dir

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
