"""A tf.data service on this machine for trying it out: a dispatcher and N worker processes
(`tfperf data-service dispatcher|worker` children, so the workers use other cores), watched
until a stop is asked; a worker that dies is restarted on its port (a few times), the
dispatcher dying stops them all."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any


class ChildDied(RuntimeError):
    """A dispatcher or worker process of the local cluster exited on its own."""


@dataclass
class Child:
    name: str  # "dispatcher", "worker 1", ...
    proc: subprocess.Popen[str]
    address: str = ""  # grpc://HOST:PORT once it serves
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def describe_exit(self) -> str:
        code = self.proc.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"status {code}"
        return f"{self.name} (PID {self.proc.pid}) exited with {how}"


def _command(role: str, *args: object) -> list[str]:
    # The children stop themselves when this process is gone (even after kill -9).
    return [sys.executable, "-m", "tfperf.cli.main", "data-service", role, "--json"] + [
        str(a) for a in (*args, "--stop-with", os.getpid())
    ]


def _spawn(name: str, cmd: list[str]) -> Child:
    # Own session: a terminal's Ctrl-C reaches this process only, which stops the children.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    child = Child(name, proc)
    threading.Thread(target=_read_lines, args=(proc.stdout, child.lines), daemon=True).start()
    return child


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    # Drained to the end so that a child never blocks on a full pipe.
    for line in stream:
        lines.put(line)


class LocalCluster:
    """The dispatcher and workers, started by `start()` and stopped by `stop()`."""

    def __init__(
        self,
        workers: int,
        host: str,
        port: int,
        work_dir: str | None,
        timeout: float,
        restarts: int = 3,
    ):
        self.workers, self.host, self.port = workers, host, port
        self.work_dir, self.timeout = work_dir, timeout
        self.restarts = restarts  # per worker
        self.restarted: dict[str, int] = {}
        self.children: list[Child] = []

    @property
    def address(self) -> str:
        return self.children[0].address

    def start(self) -> None:
        """Starts the dispatcher, then the workers; ChildDied if one exits before serving
        (its own error is on stderr), TimeoutError if one does not serve in time."""
        extra: list[object] = ["--work-dir", self.work_dir] if self.work_dir else []
        cmd = _command("dispatcher", "--host", self.host, "--port", self.port, *extra)
        self.children.append(_spawn("dispatcher", cmd))
        self._wait_serving(self.children[0])
        for i in range(1, self.workers + 1):
            self.children.append(_spawn(f"worker {i}", self._worker_command(0)))
        for child in self.children[1:]:
            self._wait_serving(child)

    def _worker_command(self, port: int) -> list[str]:
        target = self.address.removeprefix("grpc://")
        return _command(
            "worker",
            *("--dispatcher", target, "--host", self.host, "--port", port),
            *("--timeout", self.timeout),
        )

    def _wait_serving(self, child: Child) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            try:
                line = child.lines.get(timeout=0.2)
            except queue.Empty:
                if child.proc.poll() is not None:
                    raise ChildDied(f"{child.describe_exit()} before serving") from None
                continue
            data = _json(line)
            if "address" in data:
                child.address = data["address"]
                return
        raise TimeoutError(
            f"{child.name} (PID {child.proc.pid}) not serving after {self.timeout:g} s"
        )

    def watch(self, stop: threading.Event, on_restart: Callable[[str], None] = print) -> None:
        """Returns when `stop` is set. A worker that exits is restarted on its port, at most
        `restarts` times each (TensorFlow's dispatcher keeps a dead worker's tasks, so the
        trainers wait until that address serves again); ChildDied when the dispatcher
        exits or a worker has used its restarts."""
        while not stop.wait(0.5):
            for i, child in enumerate(self.children):
                if child.proc.poll() is None or stop.is_set():
                    continue
                used = self.restarted.get(child.name, 0)
                if i == 0 or used >= self.restarts:
                    raise ChildDied(child.describe_exit())
                self.restarted[child.name] = used + 1
                port = int(child.address.rsplit(":", 1)[1])
                again = _spawn(child.name, self._worker_command(port))
                self.children[i] = again
                self._wait_serving(again)
                on_restart(
                    f"{child.describe_exit()}; restarted on its port as PID {again.proc.pid} "
                    f"(restart {used + 1} of {self.restarts})"
                )

    def stop(self, grace: float = 30) -> None:
        """SIGTERM to every child still running (workers first), SIGKILL after `grace` s."""
        live = [c for c in reversed(self.children) if c.proc.poll() is None]
        for child in live:
            child.proc.terminate()
        deadline = time.monotonic() + grace
        for child in live:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()

    def describe(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "dispatcher": {"address": self.address, "pid": self.children[0].proc.pid},
            "workers": [{"address": c.address, "pid": c.proc.pid} for c in self.children[1:]],
        }


def _json(line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
