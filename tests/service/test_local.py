"""`tfperf data-service local --workers 2`: prints a working address (a client reads a
pipeline through it), stops its dispatcher and workers on SIGTERM (exit 0), restarts a worker
that dies on its port, and when one dies past --restarts says which, stops the others and
exits non-zero (with --workers 1: the dispatcher is the other). Real processes on
127.0.0.1."""

from __future__ import annotations

import signal
import time

import psutil

from helpers.servicekit import (
    START_TIMEOUT,
    preloaded_env,
    processes,
    read_json_line,
    read_service,
    start,
    stop,
)


def _local(procs, tmp_path, *args: object):
    """`tfperf data-service local ARGS` with the bind shim preloaded: its children inherit
    it and skip their re-execution under the shim (binding is tested in
    tests/cli/test_data_service.py)."""
    return start(procs, tmp_path, "local", *args, env=preloaded_env())


def _children(info: dict) -> list[int]:
    return [info["dispatcher"]["pid"], *(w["pid"] for w in info["workers"])]


def test_local_serves_restarts_a_killed_worker_and_stops_its_children_on_sigterm(tmp_path):
    """One cluster for its whole life (each start is four TensorFlow processes): it serves,
    a worker killed with kill -9 comes back on its port and serves, SIGTERM stops them all."""
    with processes() as procs:
        local = _local(procs, tmp_path, "--workers", 2)
        info = local.first
        assert info["address"].startswith("grpc://127.0.0.1:")
        assert len(info["workers"]) == 2
        got = read_service(info["address"], "parallel_epochs", 10)
        assert sorted(got) == sorted([i * i for i in range(10)] * 2)

        victim, where = info["workers"][1]["pid"], info["workers"][1]["address"]
        psutil.Process(victim).send_signal(signal.SIGKILL)
        deadline = time.monotonic() + START_TIMEOUT
        # The message is wrapped to the terminal's width: words, not lines, are compared.
        while "restarted on its port" not in " ".join(local.err().split()):
            assert time.monotonic() < deadline, local.err()
            time.sleep(0.5)
        err = " ".join(local.err().split())
        assert f"worker 2 (PID {victim}) exited with signal SIGKILL; restarted" in err, err
        assert local.popen.poll() is None  # still serving
        got = read_service(info["address"], "parallel_epochs", 10)
        assert sorted(got) == sorted([i * i for i in range(10)] * 2)  # both workers serve
        port = int(where.rsplit(":", 1)[1])
        listening = [c for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
        assert any(c.laddr.port == port for c in listening)  # the same address again

        # Its children now: the dispatcher, the first worker and the restarted one.
        children = [c.pid for c in psutil.Process(local.popen.pid).children()]
        assert len(children) == 3 and victim not in children, children
        assert stop(local) == 0, local.err()
        assert read_json_line(local.popen, 10, "the stop line")["stopped"] == "SIGTERM"
        assert not [pid for pid in children if psutil.pid_exists(pid)]


def test_local_names_a_dead_worker_and_exits_non_zero(tmp_path):
    # One worker (a TensorFlow process less): its death past --restarts 0 must still be named
    # and the dispatcher stopped; the test above runs two workers.
    with processes() as procs:
        local = _local(procs, tmp_path, "--workers", 1, "--restarts", 0)
        victim = local.first["workers"][0]["pid"]
        psutil.Process(victim).send_signal(signal.SIGKILL)
        status = local.popen.wait(timeout=START_TIMEOUT)
        assert status == 1, local.err()
        err = " ".join(local.err().split())
        assert f"worker 1 (PID {victim}) exited with signal SIGKILL" in err
        assert not [pid for pid in _children(local.first) if psutil.pid_exists(pid)]
