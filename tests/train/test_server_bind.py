"""Which host the TensorFlow server of a `tfperf train` process listens on, read before
TensorFlow starts: its TF_CONFIG task's under multi_worker, the chief's under
parameter_server, none for one process; the library's callers bind with bind_own_server or
are warned. (That `tfperf train`'s servers listen there alone, read from the OS, is checked
with the real cluster runs in test_strategy.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tfperf.config import load_config
from tfperf.train.strategy import own_server_address

from helpers import trainkit


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
