"""`convert --workload X --resume` resumes: finished splits are verified and kept (their
shards are not rewritten)."""

from __future__ import annotations

import os


def _shards(out) -> dict[str, tuple[int, int]]:
    return {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(out.iterdir())
        if ".tfrecord-" in p.name
    }


def test_workload_resume_keeps_finished_shards(tmp_path, cli):
    out = tmp_path / "chess"
    args = ["convert", "--workload", "chess", "--examples", "300", "--eval-examples", "60"]
    args += ["--shard-size", "8KiB", "--workers", "1", "--out", out, "--quiet"]
    res = cli(*args)
    assert res.exit_code == 0, res.output
    before = _shards(out)
    assert len(before) > 2
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    assert _shards(out) == before  # not one shard rewritten
    # A half-written split: its finished shards stay, the rest is written.
    victim = sorted(p for p in out.iterdir() if "-train.tfrecord-" in p.name)[-1]
    victim.unlink()
    res = cli(*args, "--resume")
    assert res.exit_code == 0, res.output
    kept = {k: v for k, v in _shards(out).items() if "-eval" in k}
    assert kept == {k: v for k, v in before.items() if "-eval" in k}
    assert os.path.exists(victim)
