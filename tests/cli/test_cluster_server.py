"""`tfperf cluster-server` listens only where the cluster file says: on 127.0.0.1 its sockets,
read from the OS, are on 127.0.0.1 alone (another address of the host is refused) and a
client on this machine still runs an op there; a user-named 0.0.0.0 listens everywhere, with
the warning that TensorFlow's servers have no authentication."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from tfperf.util.net import exposed, listening_addresses

TFPERF = str(Path(sys.executable).with_name("tfperf"))

# A client in its own process: an op placed on the server's task, run there.
CLIENT = """
import sys
from tfperf.util.startup import lean_tensorflow_import
with lean_tensorflow_import():  # the import's CPU only (util/startup.py)
    import tensorflow as tf
tf.config.experimental_connect_to_host(sys.argv[1], job_name="worker")
with tf.device("/job:worker/replica:0/task:0/device:CPU:0"):
    print(int(tf.constant(20) + 22))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _other_addresses() -> list[str]:
    """This host's IPv4 addresses other than loopback (a second way to reach it)."""
    return [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]


def _serve(tmp_path: Path, host: str):
    """Starts `tfperf cluster-server --job worker` for a cluster naming `host`; returns the
    process, its port and the stderr file once it says it serves."""
    port = _free_port()
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"worker": [f"{host}:{port}"], "ps": ["127.0.0.1:1"]}))
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "XDG_CACHE_HOME": str(tmp_path / "c")}
    with out.open("w") as o, err.open("w") as e:
        proc = subprocess.Popen(
            [TFPERF, "cluster-server", "--job", "worker", "--index", "0", "--cluster", cluster],
            stdout=o,
            stderr=e,
            env=env,
        )
    deadline = time.monotonic() + 120
    while "serving" not in out.read_text() and proc.poll() is None:
        assert time.monotonic() < deadline, "no line from the server in 120 s"
        time.sleep(0.2)
    assert proc.poll() is None, err.read_text()
    time.sleep(1)  # the exposure check runs just after the line
    return proc, port, err


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_listening_addresses_reads_the_os_socket_table():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_addresses(port) == [f"127.0.0.1:{port}"]
        assert not exposed(listening_addresses(port))
    assert exposed([f"*:{port}"]) and exposed([f"10.0.0.2:{port}"])


@pytest.mark.slow  # a server and a client process
def test_cluster_server_on_127_0_0_1_listens_there_only_and_serves(tmp_path):
    proc, port, err = _serve(tmp_path, "127.0.0.1")
    try:
        assert listening_addresses(port, proc.pid) == [f"127.0.0.1:{port}"]  # what the OS says
        assert "warning" not in err.read_text()
        for ip in _other_addresses():  # the attack of the issue: the port from another address
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((ip, port), timeout=5).close()
        client = subprocess.run(
            [sys.executable, "-c", CLIENT, f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        assert client.returncode == 0, client.stderr
        assert client.stdout.strip().splitlines()[-1] == "42"
    finally:
        _stop(proc)


def test_cluster_server_on_a_named_0_0_0_0_listens_everywhere_with_the_warning(tmp_path):
    proc, port, err = _serve(tmp_path, "0.0.0.0")
    try:
        where = listening_addresses(port, proc.pid)
        assert where == [f"*:{port}"]
        line = next(ln for ln in err.read_text().splitlines() if "listening on" in ln)
        assert f"listening on *:{port}" in line and f"0.0.0.0:{port} for worker 0" in line
        assert "no authentication" in line
    finally:
        _stop(proc)


def test_cluster_server_on_an_address_of_no_interface_is_a_user_error(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("worker: ['203.0.113.7:2222']\n")  # TEST-NET-3: never this machine
    proc = subprocess.run(
        [TFPERF, "cluster-server", "--job", "worker", "--index", "0", "--cluster", cluster],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "not an address of this machine" in " ".join(proc.stderr.split())
