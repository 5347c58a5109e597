"""service/servers in this process: a dispatcher and a worker started on port 0 (the OS's
port, read back), serving a pipeline to a client; a stop signal ends the serving loop with
its name; the exposure warning says where the OS shows a server listening; --work-dir's lock
is held while a dispatcher journals there."""

from __future__ import annotations

import os
import signal

import pytest

from tfperf.errors import UserError
from tfperf.service.servers import (
    exposure_warning,
    serve_until_stopped,
    start_dispatcher,
    start_worker,
    work_dir_held,
)
from tfperf.util.lock import LOCK_NAME, read_holder

from helpers.servicekit import read_service


@pytest.fixture(scope="module")
def served():
    """A dispatcher and one worker of this process, on 127.0.0.1."""
    dispatcher = start_dispatcher("127.0.0.1", 0, None)
    worker = start_worker(dispatcher.address, "127.0.0.1", 0, timeout=30)
    yield dispatcher, worker
    worker.server.stop()
    dispatcher.server.stop()


def test_the_servers_report_the_ports_the_os_gave_and_serve(served):
    dispatcher, worker = served
    assert dispatcher.role == "dispatcher" and worker.role == "worker"
    for s in served:
        assert s.port > 0 and s.address == f"grpc://127.0.0.1:{s.port}"
    assert sorted(read_service(dispatcher.address, "parallel_epochs", 8)) == [
        i * i for i in range(8)
    ]


def test_the_warning_tells_where_the_os_says_a_server_listens(served):
    # This process has no bind shim (the command re-executes itself under it): TensorFlow's
    # gRPC server asked for 127.0.0.1 listens on every interface, and the warning says so.
    dispatcher, worker = served
    warning = exposure_warning(dispatcher)
    assert warning.startswith(f"warning: the dispatcher listens on *:{dispatcher.port}.")
    assert "no authentication" in warning
    assert f"the worker listens on *:{worker.port}" in exposure_warning(worker)


def test_the_port_of_a_running_dispatcher_is_taken(served):
    dispatcher, _ = served
    with pytest.raises(UserError, match=f"cannot serve at 127.0.0.1:{dispatcher.port}"):
        start_dispatcher("127.0.0.1", dispatcher.port, None)


def test_a_stop_signal_ends_serving_and_is_named(tmp_path):
    dispatcher = start_dispatcher("127.0.0.1", 0, None)
    before = signal.getsignal(signal.SIGTERM)
    why = serve_until_stopped(dispatcher, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert why == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are put back
    start_dispatcher("127.0.0.1", dispatcher.port, None).server.stop()  # the port is free


def test_a_dispatchers_work_dir_is_locked_while_it_journals(tmp_path):
    with work_dir_held(str(tmp_path / "journal")):
        holder = read_holder(tmp_path / "journal")
        assert holder.pid == os.getpid() and holder.purpose == "tfperf data-service dispatcher"
    assert not (tmp_path / "journal" / LOCK_NAME).exists()
    with work_dir_held(None):  # no journal: nothing to hold
        pass
