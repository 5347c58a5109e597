"""tf.distribute for real, on 127.0.0.1: mirrored on 2 logical CPUs reaches the same loss
as one device with the same global batch; 2 multi_worker processes agree on the loss, their
TensorFlow servers listening on 127.0.0.1 only, as the cluster names it (read from the OS
while they run). parameter_server with `tfperf cluster-server` processes is trained in
test_service_trainers.py, on a tf.data service job. Plus
the cluster file's checks, `auto`'s choice, and which host a process's TensorFlow server
listens on, read before TensorFlow starts: its TF_CONFIG task's under multi_worker, the
chief's under parameter_server, none for one process; the library's callers bind with
bind_own_server or are warned (a fresh interpreter each: what its server listens on is the
point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.strategy import (
    ClusterError,
    own_server_address,
    resolve_kind,
    validate_cluster,
)

from helpers import trainkit

# One pipeline split across replicas (checkpoint_input off): the same batches as one device.
DETERMINISTIC = [
    "--set",
    "pipeline.shuffle_buffer=0",
    "--set",
    "pipeline.shuffle_files=false",
    "--set",
    "pipeline.deterministic=true",
    "--set",
    "train.checkpoint_input=false",
]


def _run(tmp_path, **train):
    data = trainkit.write_data(tmp_path / "data", n=64, shards=2)
    return trainkit.write_runfile(tmp_path, data, steps_per_loop=4, **train)


def _popen(args, env=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "tfperf.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _json(proc, timeout=240):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out)


@pytest.mark.slow  # a training process (2 logical CPUs need their own) and one run here
def test_mirrored_on_two_cpus_matches_one_device(tmp_path):
    rf2 = _run(tmp_path / "b", max_steps=8)
    two = _popen(
        [
            "train",
            str(rf2),
            "--json",
            *DETERMINISTIC,
            "--set",
            "pipeline.batch_size=8",
            "--set",
            "train.strategy=mirrored",
            "--set",
            "train.devices=2",
        ]
    )
    rf = _run(tmp_path / "a", max_steps=8)
    sets = [*DETERMINISTIC, "--set", "pipeline.batch_size=16", "--set", "train.strategy=one_device"]
    try:
        one = trainkit.tfperf_here("train", rf, "--json", *sets)  # meanwhile, in this process
    except BaseException:
        two.kill()
        two.communicate()
        raise
    a, b = json.loads(one.stdout), _json(two)
    assert b["strategy"] == "mirrored" and b["global_batch"] == 16 == a["global_batch"]
    assert b["final_loss"] == pytest.approx(a["final_loss"], rel=1e-4)
    assert (tmp_path / "b" / "run" / "checkpoints" / "ckpt-8.index").exists()


@pytest.mark.slow  # two worker processes
def test_multi_worker_processes_reach_the_same_loss(tmp_path):
    rf = _run(tmp_path, max_steps=8)
    ports = [trainkit.free_port(), trainkit.free_port()]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for i in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})
        procs.append(
            _popen(
                ["train", str(rf), "--json", "--set", "train.strategy=auto"],
                env={"TF_CONFIG": tf_config},
            )
        )
    seen = trainkit.listening_while_running(list(zip(procs, ports, strict=True)))
    results = [_json(p) for p in procs]
    assert seen == {p: [f"127.0.0.1:{p}"] for p in ports}  # each task's host, not every one
    assert [r["strategy"] for r in results] == ["multi_worker", "multi_worker"]
    assert results[0]["global_batch"] == 16  # 8 per replica x 2 workers
    assert results[0]["final_loss"] == results[1]["final_loss"]
    ckpt = tmp_path / "run" / "checkpoints"
    assert (ckpt / "ckpt-8.index").exists() and json.loads((ckpt / "FINAL").read_text())[
        "step"
    ] == 8
    assert not (tmp_path / "run" / "worker_scratch").exists()  # non-chief scratch cleaned


def test_cluster_file_errors_name_the_job(tmp_path):
    with pytest.raises(ClusterError, match="job 'boss'"):
        validate_cluster({"boss": ["h:1"]}, "c.yaml")
    with pytest.raises(ClusterError, match="job 'ps': expected a list of host:port"):
        validate_cluster({"ps": ["nohostport"]}, "c.yaml")
    assert validate_cluster({"worker": "h:1"}, "c.yaml") == {"worker": ["h:1"]}
    cfile = tmp_path / "cluster.yaml"
    cfile.write_text(yaml.safe_dump({"ps": ["127.0.0.1:1"]}))
    # In this process: the index is checked before TensorFlow or a server is started.
    proc = trainkit.tfperf_here(
        "cluster-server", "--job", "ps", "--index", "3", "--cluster", str(cfile), check=False
    )
    assert proc.returncode == 2 and "lists 1 'ps' task(s)" in " ".join(proc.stderr.split())


def test_auto_reads_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert resolve_kind("auto") == "one_device"
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}}))
    assert resolve_kind("auto") == "multi_worker"
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1"], "ps": ["c:3"]}}))
    assert resolve_kind("auto") == "parameter_server"
    assert resolve_kind("mirrored") == "mirrored"


def test_own_server_address_is_the_task_address(tmp_path, monkeypatch):
    rf = trainkit.write_runfile(tmp_path, tmp_path / "data")
    cluster = {"worker": ["127.0.0.1:7001", "127.0.0.2:7002"]}
    conf = {"cluster": cluster, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(conf))
    cfg = load_config(str(rf), [])  # auto: two workers in TF_CONFIG are multi_worker
    assert own_server_address(cfg) == ("127.0.0.2:7002", "TF_CONFIG's worker 1")
    cfile = tmp_path / "cluster.yaml"
    cfile.write_text(yaml.safe_dump({"chief": ["localhost:7000"], **cluster, "ps": ["h:1"]}))
    ps = load_config(str(rf), ["train.strategy=parameter_server", f"train.cluster={cfile}"])
    assert own_server_address(ps) == ("localhost:7000", f"{cfile}'s chief")
    monkeypatch.delenv("TF_CONFIG")
    assert own_server_address(load_config(str(rf), [])) is None  # one process: no server


# The library path: make_strategy in a user's own process, with or without bind_own_server.
LIBRARY = """
import sys
from tfperf.config import load_config
from tfperf.train.strategy import bind_own_server, make_strategy
from tfperf.util.net import listening_addresses
cfg = load_config(sys.argv[1], ["train.strategy=multi_worker"])
if sys.argv[3] == "bind":
    bind_own_server(cfg)
make_strategy(cfg)
print(listening_addresses(int(sys.argv[2])))
"""


@pytest.mark.parametrize("bind", ["bind", "no"])
def test_library_callers_bind_with_bind_own_server_or_are_warned(tmp_path, bind):
    rf = trainkit.write_runfile(tmp_path, tmp_path / "data")
    port = trainkit.free_port()
    conf = {"cluster": {"worker": [f"127.0.0.1:{port}"]}, "task": {"type": "worker", "index": 0}}
    env = {**os.environ, "TF_CONFIG": json.dumps(conf), "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", LIBRARY, str(rf), str(port), bind],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout.strip().splitlines()[-1]
    warned = "will listen on every interface" in " ".join(proc.stderr.split())
    if bind == "bind":
        assert shown == str([f"127.0.0.1:{port}"]) and not warned
    else:
        assert shown == str([f"*:{port}"]) and warned
