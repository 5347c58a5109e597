"""service/preflight, without TensorFlow: addresses parsed or refused, the host clients dial,
a taken port named with the process holding it (a real socket of this process), and a
dispatcher that does not answer gRPC within the timeout (a real gRPC server when it does)."""

from __future__ import annotations

import os
import socket
from concurrent import futures

import grpc
import pytest

from tfperf.errors import UserError
from tfperf.service.preflight import (
    advertised_host,
    ensure_port_free,
    split_address,
    wait_for_dispatcher,
)


def test_addresses_with_or_without_the_scheme():
    assert split_address("127.0.0.1:5050", "--dispatcher") == ("127.0.0.1", 5050)
    assert split_address("grpc://trainer-1:80", "--dispatcher") == ("trainer-1", 80)
    assert split_address("[::1]:5050", "--dispatcher") == ("::1", 5050)


@pytest.mark.parametrize("bad", ["5050", "host:", ":5050", "host:port", "host:0", "host:70000"])
def test_a_malformed_address_names_the_option(bad):
    with pytest.raises(UserError, match=f"--dispatcher: expected HOST:PORT .* found '{bad}'"):
        split_address(bad, "--dispatcher")


def test_a_wildcard_host_is_advertised_as_this_machine():
    for wildcard in ("", "0.0.0.0", "::", "*"):
        assert advertised_host(wildcard) == socket.gethostname()
    assert advertised_host("127.0.0.1") == "127.0.0.1"


def test_a_taken_port_is_named_with_its_holder():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UserError) as err:
            ensure_port_free("127.0.0.1", port, "worker")
        msg = str(err.value)
        assert f"data-service worker: cannot serve at 127.0.0.1:{port}: the port is taken" in msg
        assert f"held by PID {os.getpid()}" in msg
        with pytest.raises(UserError, match="the port is taken"):
            ensure_port_free("0.0.0.0", port, "dispatcher")  # every interface includes it
    ensure_port_free("127.0.0.1", port, "worker")  # closed: free again
    ensure_port_free("127.0.0.1", 0, "worker")  # the OS picks one: nothing to check


def test_a_dispatcher_that_does_not_answer_is_named_after_the_timeout():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nobody answers
        with pytest.raises(UserError) as err:
            wait_for_dispatcher(f"127.0.0.1:{port}", timeout=0.5)
    msg = str(err.value)
    assert f"cannot reach the dispatcher at 127.0.0.1:{port} (--dispatcher)" in msg
    assert "(--timeout 0.5)" in msg and f"--port {port}`" in msg


def test_a_grpc_server_that_answers_is_ready():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        wait_for_dispatcher(f"127.0.0.1:{port}", timeout=10)
    finally:
        server.stop(None)
