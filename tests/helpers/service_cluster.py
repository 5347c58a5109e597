"""A real tf.data service for the run-file tests: `tfperf data-service local --workers N`
(a dispatcher and N worker processes on 127.0.0.1 at ports chosen at run time), ready once
the dispatcher lists every worker, killed with its children on exit whatever happened."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers.servicekit import kill_tree

START_TIMEOUT = 240  # several TensorFlow imports on two busy cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_json(popen: subprocess.Popen, log: Path, deadline: float) -> dict:
    sel = selectors.DefaultSelector()
    sel.register(popen.stdout, selectors.EVENT_READ)
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=1.0):
                continue
            line = popen.stdout.readline()
            if not line:
                raise AssertionError(f"data-service local ended: {log.read_text()[-3000:]}")
            if line.startswith("{"):
                return json.loads(line)
    finally:
        sel.close()
    raise AssertionError(f"data-service local printed no address: {log.read_text()[-3000:]}")


@contextmanager
def service(tmp: Path, workers: int = 2) -> Iterator[str]:
    """Yields the dispatcher's address, grpc://127.0.0.1:PORT, once `workers` registered."""
    from tfperf.inputs.service import registered_workers

    log = tmp / "data-service.log"
    cmd = [sys.executable, "-m", "tfperf.cli.main", "data-service", "local", "--json"]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    popen = subprocess.Popen(
        [*cmd, "--workers", str(workers)],
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        address = _first_json(popen, log, deadline)["address"]
        while registered_workers(address.removeprefix("grpc://"), timeout=10) < workers:
            assert time.monotonic() < deadline, "the workers did not register in time"
            time.sleep(0.5)
        yield address
    finally:
        # Killed with its children at once: a graceful stop waits up to 30 s for workers
        # still holding the tasks of jobs nobody reads (SIGTERM's path is tested in
        # service/test_local_cluster.py). Only this process and its own children.
        kill_tree(popen)
