"""`tfperf data-service dispatcher|worker` as real processes on 127.0.0.1: a dispatcher and a
worker serve a tf.data pipeline to a client in this process, listen on 127.0.0.1 only,
and exit 0 on SIGTERM; a taken port and an unreachable dispatcher are clear errors naming
the address. The commands that fail before serving start with the bind shim preloaded
(they skip re-executing under it: ~0.5 s of CPU each); the servers bind as users' do. Two
workers serving one job are service/test_local.py's (`data-service local --workers 2`)."""

from __future__ import annotations

import socket
import time

import pytest

from helpers.servicekit import (
    free_port,
    listening,
    preloaded_env,
    processes,
    read_json_line,
    read_service,
    run_tfperf,
    start,
    stop,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A dispatcher and a worker started with the CLI, shared by the tests below."""
    tmp = tmp_path_factory.mktemp("cluster")
    with processes() as procs:
        dispatcher = start(procs, tmp, "dispatcher", "--port", free_port())
        start(procs, tmp, "worker", "--dispatcher", dispatcher.target, "--timeout", 120)
        yield procs


def test_dispatcher_and_a_worker_serve_a_pipeline(cluster):
    dispatcher, worker = cluster
    assert dispatcher.address.startswith("grpc://127.0.0.1:")
    # The worker registers the host it binds and the port it got.
    assert worker.address.startswith("grpc://127.0.0.1:") and worker.address != dispatcher.address
    got = read_service(dispatcher.address, "parallel_epochs", 20)
    # parallel_epochs: the worker serves the whole dataset once.
    assert sorted(got) == [i * i for i in range(20)]


def test_every_server_listens_on_loopback_only(cluster):
    for proc in cluster:
        port = int(proc.address.rsplit(":", 1)[1])
        where = listening(proc.popen.pid)
        assert f"127.0.0.1:{port}" in where, (proc.first, where)
        assert all(w.startswith("127.0.0.1:") for w in where), (proc.first, where)


def test_the_port_of_a_running_dispatcher_is_taken(cluster):
    # gRPC binds with SO_REUSEPORT: TensorFlow alone would start a second dispatcher on the
    # same port, and clients would reach either one.
    port = int(cluster[0].address.rsplit(":", 1)[1])
    res = run_tfperf("data-service", "dispatcher", "--port", port, env=preloaded_env())
    assert res.returncode == 2, res.stderr
    err = " ".join(res.stderr.split())
    assert f"data-service dispatcher: cannot serve at 127.0.0.1:{port}: the port is taken" in err
    assert "Traceback" not in res.stderr


def test_sigterm_stops_each_server_cleanly(cluster):

    for proc in reversed(cluster):  # workers first, then the dispatcher
        assert stop(proc) == 0, proc.err()
        said = read_json_line(proc.popen, 10, "the stop line")
        assert said == {"role": proc.first["role"], "address": proc.address, "stopped": "SIGTERM"}


def test_taken_port_is_an_error_naming_the_address():
    # The worker's port taken by a plain socket (the dispatcher's case is the test above, its
    # port taken by a running dispatcher: one `tfperf` start less).
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ("worker", "--port", port, "--dispatcher", "127.0.0.1:1")
        res = run_tfperf("data-service", *args, env=preloaded_env())
        assert res.returncode == 2, res.stderr
        err = " ".join(res.stderr.split())
        assert f"data-service worker: cannot serve at 127.0.0.1:{port}: the port is taken" in err
        assert "Traceback" not in res.stderr


def test_unreachable_dispatcher_is_an_error_within_the_timeout():
    nobody = free_port()  # nothing listens there
    started = time.monotonic()
    args = ("worker", "--dispatcher", f"127.0.0.1:{nobody}", "--timeout", 2)
    res = run_tfperf("data-service", *args, env=preloaded_env())
    assert res.returncode == 2, res.stderr
    err = " ".join(res.stderr.split())
    assert f"cannot reach the dispatcher at 127.0.0.1:{nobody} (--dispatcher) within 2 s" in err
    assert "(--timeout 2)" in err
    assert time.monotonic() - started < 60


def test_a_wildcard_host_listens_everywhere_with_the_warning(tmp_path):
    with processes() as procs:
        proc = start(procs, tmp_path, "dispatcher", "--port", 0, "--host", "0.0.0.0")
        port = int(proc.address.rsplit(":", 1)[1])
        assert proc.address == f"grpc://{socket.gethostname()}:{port}"  # what clients dial
        assert stop(proc) == 0
    err = " ".join(proc.err().split())
    assert f"warning: the dispatcher listens on *:{port}" in err
    assert "no authentication" in err
