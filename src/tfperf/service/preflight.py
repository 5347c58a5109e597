"""What is checked before a tf.data service server starts, without TensorFlow: the form of an
address, the port free, and the dispatcher answering gRPC. TensorFlow's servers get none of
these right on their own (a taken port can abort them; a worker waits forever, holding
Python's GIL, for a dispatcher that is not there)."""

from __future__ import annotations

import socket
import time

import psutil

from tfperf.errors import UserError

WILDCARDS = ("", "0.0.0.0", "::", "*")


def split_address(text: str, what: str) -> tuple[str, int]:
    """(host, port) of "HOST:PORT" or "grpc://HOST:PORT"; `what` names the option in the error."""
    bare = text.removeprefix("grpc://")
    host, sep, port = bare.rpartition(":")
    host = host.strip("[]")  # [::1]:5050
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(
            f"{what}: expected HOST:PORT (e.g. 127.0.0.1:5050 or grpc://127.0.0.1:5050), "
            f"found '{text}'"
        )
    return host, int(port)


def advertised_host(host: str) -> str:
    """The name clients use to reach a server bound to `host`: the host itself, or this
    machine's name when the server binds every interface."""
    return socket.gethostname() if host in WILDCARDS else host


def ensure_port_free(host: str, port: int, role: str) -> None:
    """Raises UserError naming HOST:PORT when something already listens there. gRPC binds
    with SO_REUSEPORT, so a second TensorFlow server on a taken port would not fail cleanly:
    a plain socket is tried first (SO_REUSEADDR only: a port left in TIME_WAIT is free)."""
    if port == 0:
        return
    bind_host = "::" if host == "::" else ("0.0.0.0" if host in WILDCARDS else host)
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind_host, port))
        except OSError as exc:
            raise UserError(
                f"data-service {role}: cannot serve at {host}:{port}: the port is taken "
                f"({exc.strerror}{_holder(port)}); choose another --port, or stop what "
                "listens there"
            ) from None


def _holder(port: int) -> str:
    """ ", held by PID N (NAME)" when this user may see the process that listens on `port`."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:
        return ""
    for conn in conns:
        laddr = conn.laddr  # () for a socket not bound to an address
        if conn.status == psutil.CONN_LISTEN and laddr and laddr.port == port and conn.pid:
            try:
                return f", held by PID {conn.pid} ({psutil.Process(conn.pid).name()})"
            except psutil.Error:
                return f", held by PID {conn.pid}"
    return ""


def wait_for_dispatcher(address: str, timeout: float) -> None:
    """Returns once a gRPC server answers at `address` (HOST:PORT), or raises UserError
    naming it after `timeout` seconds. TensorFlow's worker would instead retry forever."""
    import grpc  # TensorFlow's own dependency

    started = time.monotonic()
    channel = grpc.insecure_channel(address)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        raise UserError(
            f"data-service worker: cannot reach the dispatcher at {address} (--dispatcher) "
            f"within {time.monotonic() - started:.0f} s (--timeout {timeout:g}); start it "
            f"first (`tfperf data-service dispatcher --port {address.rsplit(':', 1)[1]}` on "
            "that machine), or check the address and the network between the two"
        ) from None
    finally:
        channel.close()
