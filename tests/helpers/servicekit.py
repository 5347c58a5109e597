"""Helpers of the tf.data service tests: `tfperf data-service ...` started as real processes
on 127.0.0.1 at free ports chosen at run time, their JSON lines read with a deadline, and
every process killed at the end whatever happened."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

TFPERF = str(Path(sys.executable).parent / "tfperf")
START_TIMEOUT = 240  # four TensorFlow imports on two busy cores


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    popen: subprocess.Popen
    stderr: Path
    first: dict  # its first JSON line

    @property
    def address(self) -> str:
        return self.first["address"]

    @property
    def target(self) -> str:  # HOST:PORT
        return self.address.removeprefix("grpc://")

    def err(self) -> str:
        return self.stderr.read_text()


def read_json_line(popen: subprocess.Popen, timeout: float, why: str = "a JSON line") -> dict:
    """The next JSON line of `popen`'s stdout, or an AssertionError after `timeout` s."""
    sel = selectors.DefaultSelector()
    sel.register(popen.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(timeout=min(left, 1.0)):
                continue
            line = popen.stdout.readline()
            if not line:
                raise AssertionError(f"process ended (status {popen.wait()}) before {why}")
            if line.startswith("{"):
                return json.loads(line)
        raise AssertionError(f"no {why} in {timeout} s")
    finally:
        sel.close()


@contextmanager
def processes() -> Iterator[list[Proc]]:
    """A list to start processes into (with `start`): all of them and their children are
    killed on exit."""
    procs: list[Proc] = []
    try:
        yield procs
    finally:
        for p in procs:
            kill_tree(p.popen)


def start(
    procs: list[Proc], tmp: Path, *args: object, wait: bool = True, env: dict | None = None
) -> Proc:
    """`tfperf data-service ARGS --json` in the background, appended to `procs`; with `wait`,
    returns once it printed the address it serves."""
    err = tmp / f"stderr-{len(procs)}-{args[0]}.txt"
    popen = subprocess.Popen(
        [TFPERF, "data-service", *(str(a) for a in args), "--json"],
        stdout=subprocess.PIPE,
        stderr=err.open("w"),
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})},
    )
    proc = Proc(popen, err, {})
    procs.append(proc)
    if wait:
        try:
            proc.first = read_json_line(popen, START_TIMEOUT, f"{args[0]}'s address")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; stderr:\n{proc.err()}") from None
    return proc


def preloaded_env(host: str = "127.0.0.1") -> dict[str, str]:
    """The variables that start a `tfperf` server or trainer with tfperf's bind shim already
    preloaded for `host` (util.bind.bound_env): its servers listen on `host` alone as usual,
    and it skips the re-execution under the shim that `ensure_bound` does otherwise (~0.5 s
    of CPU per process: the command line's imports twice). For tests not about that step;
    tests/util/test_bind.py, tests/cli/test_data_service.py and test_cluster_server.py
    start their servers without it."""
    from tfperf.util.bind import bound_env

    return {k: v for k, v in bound_env(host).items() if os.environ.get(k) != v}


def run_tfperf(
    *args: object, timeout: float = 120, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`tfperf ARGS` to its end, output captured (`env`: variables added to os.environ)."""
    cmd = [TFPERF, *(str(a) for a in args)]
    full_env = {**os.environ, **env} if env else None
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


def stop(proc: Proc, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    proc.popen.send_signal(sig)
    return proc.popen.wait(timeout=timeout)


def kill_tree(popen: subprocess.Popen) -> None:
    try:
        family = [psutil.Process(popen.pid), *psutil.Process(popen.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    try:
        popen.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def listening(pid: int) -> list[str]:
    """ "IP:PORT" of every TCP socket process `pid` listens on (a v4-mapped IPv6 address as
    the IPv4 one)."""
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return sorted(
        {
            f"{c.laddr.ip.removeprefix('::ffff:')}:{c.laddr.port}"
            for c in conns
            if c.status == "LISTEN"
        }
    )


def read_service(address: str, mode: str, n: int, job_name: str | None = None) -> list[int]:
    """The elements of range(n) squared, read through the service at `address`."""
    import tensorflow as tf

    ds = tf.data.Dataset.range(n).map(lambda x: x * x)
    ds = ds.apply(tf.data.experimental.service.distribute(mode, service=address, job_name=job_name))
    return [int(x) for x in ds.as_numpy_iterator()]
