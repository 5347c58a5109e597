"""Several trainer processes on one tf.data service job (issue 11): two real `tfperf train`
processes under multi_worker (TF_CONFIG, 127.0.0.1) read a dispatcher and 2 workers
(`tfperf data-service local`) in distributed_epoch with one job_name. Both finish at a sane
loss, and the ids each trained on (logged per step by the with_ids model) split every epoch
between them: each example once per epoch across the two, none left out (the local
input-context sharding would have left half of the files unread on top of the service's
split)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import service_cluster
import trainkit
import yaml

N, SHARDS, BATCH = 256, 16, 8  # 8 examples per replica and step, 2 trainers
EPOCH_STEPS = N // (2 * BATCH)
pytestmark = pytest.mark.slow  # a service of three processes and two trainer processes


def _trainer(rf: Path, index: int, cluster: dict, ids: Path, *args: str) -> subprocess.Popen:
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "CUDA_VISIBLE_DEVICES": "",
        "TF_CONFIG": json.dumps(tf_config),
        "IDS_LOG": str(ids),
    }
    cmd = [sys.executable, "-m", "tfperf.cli.main", "train", str(rf), "--no-progress", "--json"]
    return subprocess.Popen(
        [*cmd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen, timeout: float = 400) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out), err


def _stream(log: Path) -> list[int]:
    """The ids one trainer trained on, in order (one line per step)."""
    return [int(i) for line in log.read_text().splitlines() for i in line.split()]


def _epoch_cuts(a: list[int], b: list[int], n: int, epochs: int) -> list[tuple[int, int]]:
    """(a's share, b's share) of each of the first `epochs` epochs in the two trainers'
    streams: each trainer reads its part of epoch k before any of epoch k+1 (a job iteration
    ends for a client only once all its elements were handed out), so each epoch is a head of
    a and a head of b that together hold every id 1..n exactly once. Fails when no such split
    exists. (The last epoch read is left out: one trainer may have stopped inside its share.)"""
    everything, cuts = list(range(1, n + 1)), []
    while len(cuts) < epochs:
        found = [
            c
            for c in range(max(0, n - len(b)), min(n, len(a)) + 1)
            if sorted(a[:c] + b[: n - c]) == everything
        ]
        assert found, f"epoch {len(cuts)}: no split of its {n} ids between the two trainers"
        c = found[0]
        cuts.append((c, n - c))
        a, b = a[c:], b[n - c :]
    return cuts


def _runfile(tmp_path: Path, address: str, steps: int) -> Path:
    data = trainkit.write_data(tmp_path / "data", n=N, shards=SHARDS)
    rf = trainkit.write_runfile(
        tmp_path, data, model="tinymodels:with_ids", max_steps=steps, steps_per_loop=1
    )
    doc = yaml.safe_load(rf.read_text())
    doc["pipeline"]["batch_size"] = BATCH
    doc["pipeline"]["service"] = {
        "address": address,
        "mode": "distributed_epoch",
        "job_name": "two-trainers",
        "timeout": 120,
    }
    rf.write_text(yaml.safe_dump(doc))
    return rf


def test_two_multi_worker_trainers_split_each_epoch_of_one_job(tmp_path):
    # 3 epochs checked: one trainer may take a whole epoch (its client prefetches the next
    # job iteration while the other still trains on its buffered share of the last one).
    steps = 6 * EPOCH_STEPS
    ports = [trainkit.free_port(), trainkit.free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    logs = [tmp_path / "ids-0.txt", tmp_path / "ids-1.txt"]
    with service_cluster.service(tmp_path, workers=2) as address:
        rf = _runfile(tmp_path, address, steps)
        procs = [_trainer(rf, i, cluster, logs[i]) for i in range(2)]
        try:
            results = [_finish(p) for p in procs]
        finally:
            for p in procs:  # only the processes started here, by their own handles
                if p.poll() is None:
                    p.kill()
                    p.communicate()
    (first, err), (second, _) = results
    assert [r["strategy"] for r, _ in results] == ["multi_worker", "multi_worker"]
    assert first["steps"] == second["steps"] == steps and first["global_batch"] == 2 * BATCH
    assert "tf.data service" in err and "(distributed_epoch)" in err
    # Learned (from ~0.69), and the same model on both (one all-reduce per step).
    assert math.isfinite(first["final_loss"]) and first["final_loss"] < 0.5, first
    assert first["final_loss"] == pytest.approx(second["final_loss"], rel=1e-5)
    a, b = _stream(logs[0]), _stream(logs[1])
    assert len(a) == len(b) == steps * BATCH  # every step trained a full batch on each
    cuts = _epoch_cuts(a, b, N, epochs=3)
    # Both trainers read from one job (each reading its own whole epochs would split as
    # (0, N) every time: one trainer's next N ids alone are an epoch).
    assert any(min(share) > 0 for share in cuts), cuts
    print(f"final loss {first['final_loss']:.3f}; each epoch's ids split as {cuts}")
