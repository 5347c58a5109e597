"""`tfperf cluster-server` tells the truth about its exposure: where the OS says the server
listens (TensorFlow's gRPC server binds every interface), with the warning that it has no
authentication. Checked against the process's listening sockets read from the OS."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tfperf.util.net import exposed, listening_addresses

TFPERF = str(Path(sys.executable).with_name("tfperf"))


def test_listening_addresses_reads_the_os_socket_table():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_addresses(port) == [f"127.0.0.1:{port}"]
        assert not exposed(listening_addresses(port))
    assert exposed([f"*:{port}"]) and exposed([f"10.0.0.2:{port}"])


def test_cluster_server_warns_with_the_sockets_the_os_shows(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text("ps: ['127.0.0.1:0']\nworker: ['127.0.0.1:0']\n")
    err = tmp_path / "stderr"
    with err.open("w") as e:
        proc = subprocess.Popen(
            [TFPERF, "cluster-server", "--job", "ps", "--index", "0", "--cluster", cluster],
            stdout=subprocess.DEVNULL,
            stderr=e,
        )
        try:
            deadline = time.monotonic() + 120
            while "warning: listening on" not in err.read_text() and proc.poll() is None:
                assert time.monotonic() < deadline, "no warning from the server in 120 s"
                time.sleep(0.2)
            line = next(ln for ln in err.read_text().splitlines() if "listening on" in ln)
            shown = line.split("listening on ")[1].split(" (")[0].split(", ")
            port = int(shown[0].rsplit(":", 1)[1])
            assert shown == listening_addresses(port, proc.pid)  # what the OS says
            assert "no authentication" in line
        finally:
            proc.terminate()
            proc.wait(timeout=60)
