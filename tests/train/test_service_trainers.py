"""Several trainer processes on one tf.data service job (issue 11): two real `tfperf train`
processes under multi_worker (TF_CONFIG, 127.0.0.1) read a dispatcher and 2 workers (`tfperf
data-service local`, the session's) in distributed_epoch with one job_name. Both finish at a
sane loss, and the ids each trained on (logged per step by the with_ids model) split every
epoch between them: each example once per epoch across the two, none left out (the local
input-context sharding would have left half of the files unread on top of the service's
split). Under parameter_server, a coordinator and `tfperf cluster-server` ps and worker
processes read one job: each example about once per epoch, every server of the cluster
listening on 127.0.0.1 only and saying on stdout where it serves."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from helpers import service_cluster, servicekit, trainkit

N, SHARDS, BATCH = 256, 16, 8  # 8 examples per replica and step, 2 trainers
EPOCH_STEPS = N // (2 * BATCH)
pytestmark = pytest.mark.slow  # a service of three processes and two trainer processes


@pytest.fixture
def address(shared_data_service: str) -> str:
    """The session's service (each test reads a job of its own name)."""
    return shared_data_service


def _env(**extra: str) -> dict[str, str]:
    """A trainer's or cluster server's environment. The bind shim is preloaded (util.bind):
    a process whose TF_CONFIG or cluster file names its server binds it on 127.0.0.1 without
    re-executing itself under the shim first (that step is tested in train/test_strategy.py
    and cli/test_cluster_server.py)."""
    quiet = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    return {**os.environ, **quiet, **servicekit.preloaded_env(), **extra}


def _trainer(rf: Path, index: int, cluster: dict, ids: Path, *args: str) -> subprocess.Popen:
    tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
    env = _env(TF_CONFIG=json.dumps(tf_config), IDS_LOG=str(ids))
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
    exists. (The last epoch read is left out: one trainer may have stopped inside its share.)
    Every epoch replays nearly the same order, so one trainer's next n ids can also look like
    a whole epoch: each possible cut is tried, backtracking when later epochs do not fit."""
    everything = list(range(1, n + 1))

    def cuts(a: list[int], b: list[int], left: int) -> list[tuple[int, int]] | None:
        if left == 0:
            return []
        # A shared epoch first: when a whole epoch in one stream also fits, both are splits
        # of the same streams (two trainers reading separate jobs in one order could not
        # share an epoch: both heads hold the same ids), and (0, n) first hid the shared one
        # beside two CPU hogs, failing the test that asks for one.
        span = range(max(0, n - len(b)), min(n, len(a)) + 1)
        for c in sorted(span, key=lambda c: c in (0, n)):
            if sorted(a[:c] + b[: n - c]) == everything:
                rest = cuts(a[c:], b[n - c :], left - 1)
                if rest is not None:
                    return [(c, n - c), *rest]
        return None

    found = cuts(a, b, epochs)
    assert found is not None, f"no split of {epochs} epochs of {n} ids between the two trainers"
    return found


# Under parameter_server the steps run in the cluster-server worker processes, where a
# py_function of the coordinator cannot run: the ids are printed to a file by TensorFlow.
PRINTED_IDS = """
import os
import keras
import tensorflow as tf


class PrintIds(keras.layers.Layer):
    def call(self, x, ids):
        where = "file://" + os.environ["IDS_LOG"]  # read when traced, on the coordinator
        done = tf.print(ids, summarize=-1, output_stream=where)
        with tf.control_dependencies([done]):
            return tf.identity(x)


def printed_ids():
    x = keras.Input(shape=(4,), name="x")
    i = keras.Input(shape=(), dtype="int64", name="id")
    h = keras.layers.Dense(8, activation="relu", name="hidden")(PrintIds(name="ids")(x, i))
    return keras.Model({"x": x, "id": i}, keras.layers.Dense(1, name="logit")(h))
"""


def _runfile(
    tmp_path: Path,
    address: str,
    steps: int,
    model: str = "tinymodels:with_ids",
    job_name: str = "two-trainers",
    **train,
) -> Path:
    data = trainkit.write_data(tmp_path / "data", n=N, shards=SHARDS)
    # Scalars every 32 steps and no histograms (write_runfile's default writes scalars every
    # step, histograms every 5): no test here reads the summaries.
    train = {"log_every": 32, "histogram_every": 1000, **train}
    rf = trainkit.write_runfile(tmp_path, data, model=model, max_steps=steps, **train)
    (tmp_path / "psmodels.py").write_text(PRINTED_IDS)
    doc = yaml.safe_load(rf.read_text())
    doc["pipeline"]["batch_size"] = BATCH
    doc["pipeline"]["service"] = {
        "address": address,
        "mode": "distributed_epoch",
        "job_name": job_name,
        "timeout": 120,
    }
    rf.write_text(yaml.safe_dump(doc))
    return rf


def test_two_multi_worker_trainers_split_each_epoch_of_one_job(tmp_path, address):
    # 3 epochs checked: one trainer may take a whole epoch (its client prefetches the next
    # job iteration while the other still trains on its buffered share of the last one).
    steps = 6 * EPOCH_STEPS
    ports = [trainkit.free_port(), trainkit.free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    logs = [tmp_path / "ids-0.txt", tmp_path / "ids-1.txt"]
    # 4 steps per call (one id line per step all the same): a quarter of the loop's calls.
    rf = _runfile(tmp_path, address, steps, steps_per_loop=4)
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


def test_parameter_server_workers_split_one_job(tmp_path, address):
    """A coordinator, a ps and 2 worker tasks (`tfperf cluster-server`): each worker task
    builds its dataset inside a function (the coordinator's per-worker dataset), both on
    one job of the service. Every TensorFlow server of the cluster listens on 127.0.0.1
    only, as the cluster file names it (read from the OS while they run), and each server
    says on stdout where it serves."""
    epochs = 4
    steps = epochs * N // BATCH  # each step: one batch on one of the worker tasks
    log = tmp_path / "ids.txt"
    jobs = (("ps", 0), ("worker", 0), ("worker", 1))
    cluster: dict[str, list[str]] = {"chief": [f"127.0.0.1:{trainkit.free_port()}"]}
    for job, _ in jobs:
        cluster.setdefault(job, []).append(f"127.0.0.1:{trainkit.free_port()}")
    cfile = tmp_path / "cluster.yaml"
    cfile.write_text(yaml.safe_dump(cluster))
    rf = _runfile(
        tmp_path, address, steps, "psmodels:printed_ids", job_name="ps-workers", steps_per_loop=4
    )
    args = ["--set", "train.strategy=parameter_server", "--set", f"train.cluster={cfile}"]
    cmd = [sys.executable, "-m", "tfperf.cli.main", "train", str(rf), "--no-progress"]

    def train(*more: str) -> subprocess.Popen:
        env = _env(IDS_LOG=str(log))
        return subprocess.Popen(
            [*cmd, "--json", *args, *more],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "tfperf.cli.main", "cluster-server", "--job", job]
            + ["--index", str(i), "--cluster", str(cfile)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=(tmp_path / f"{job}-{i}.txt").open("w"),
            text=True,
        )
        for job, i in jobs
    ]
    ports = [int(cluster[job][i].rsplit(":", 1)[1]) for job, i in (("chief", 0), *jobs)]
    unnamed = proc = None
    try:
        # Without a job_name each worker task would read all the data (parameter_server
        # gives each its own input context, 1 of 1): refused before connecting.
        unnamed = train("--set", "pipeline.service.job_name=null")
        unnamed_err = unnamed.communicate(timeout=400)[1]
        proc = train()
        seen = trainkit.listening_while_running(list(zip([proc, *servers], ports, strict=True)))
        out_text, err = proc.communicate(timeout=400)
    finally:
        for p in [*servers, unnamed, proc]:
            if p is not None and p.poll() is None:  # only the processes started here
                p.kill()
        said = [s.communicate(timeout=60)[0] for s in servers]
    assert unnamed.returncode == 2 and "Traceback" not in unnamed_err, unnamed_err[-3000:]
    said_unnamed = " ".join(unnamed_err.split())
    assert "2 parameter_server worker tasks" in said_unnamed
    assert "set pipeline.service.job_name" in said_unnamed
    assert proc.returncode == 0, err[-4000:]
    assert seen == {p: [f"127.0.0.1:{p}"] for p in ports}  # the coordinator's and the tasks'
    for (job, i), server_said in zip(jobs, said, strict=True):
        assert server_said.startswith(f"{job} {i} serving at {cluster[job][i]} ("), server_said
    out = json.loads(out_text)
    assert out["strategy"] == "parameter_server" and out["steps"] == steps
    assert math.isfinite(out["final_loss"]) and out["final_loss"] < 0.5, out
    assert (tmp_path / "run" / "checkpoints" / f"ckpt-{steps}.index").exists()
    # The ids of every step (the zeros of the model's first call on zeros left out): each
    # example about once per epoch. Both tasks read ahead of their steps, so the last
    # epochs are cut anywhere: within one of `epochs`, never half of them unread.
    batches = [[int(i) for i in line.strip("[] \n").split()] for line in log.open()]
    ids = Counter(i for b in batches if any(b) for i in b)
    assert sum(ids.values()) == steps * BATCH
    assert set(ids) == set(range(1, N + 1)), sorted(set(range(1, N + 1)) - set(ids))[:10]
    print(
        f"final loss {out['final_loss']:.3f}; reads per id {sorted(Counter(ids.values()).items())}"
    )
    assert epochs - 2 <= min(ids.values()) and max(ids.values()) <= epochs + 2, ids


def test_multi_worker_without_job_name_is_refused_before_connecting(tmp_path):
    """Checked from TF_CONFIG before the cluster starts: the other worker never comes, and
    no dispatcher is needed to know that two workers would each read everything."""
    cluster = {"worker": [f"127.0.0.1:{trainkit.free_port()}" for _ in range(2)]}
    rf = _runfile(tmp_path, f"127.0.0.1:{service_cluster.free_port()}", 8)
    tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    # A process of its own: `tfperf train` binds its server (TF_CONFIG names it) before
    # TensorFlow is imported (here under the preloaded shim), and were the check gone it
    # would wait for the other worker.
    proc = trainkit.tfperf(
        "train",
        str(rf),
        "--set",
        "pipeline.service.job_name=null",
        env={"TF_CONFIG": tf_config, **servicekit.preloaded_env()},
        check=False,
        timeout=120,  # without the check: waits for the other worker, for ever
    )
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "2 multi_worker tasks (TF_CONFIG) read the tf.data service" in said
    assert "set pipeline.service.job_name" in said
