"""`tfperf data-service dispatcher|worker|local`: the tf.data service's servers as tfperf
processes (tfperf.service), to scale a run's input preprocessing out to more cores or
machines. Each prints the address it serves and runs until SIGTERM or Ctrl-C."""

from __future__ import annotations

import json
import os
import threading
from typing import Annotated, Any

import typer

from tfperf.cli.common import command, console, print_error, report_stream, stdout_console
from tfperf.util.format import plural

NOTES = """The tf.data service scales input preprocessing out: its workers run the pipeline
(decoding, augmentation...) on other cores or machines and stream the elements to the
trainer over gRPC, so the input is no longer limited by the trainer host's CPU.

Security: TensorFlow's tf.data servers have no authentication (anyone who can reach the port
can send them work and read the data): they listen on 127.0.0.1 unless --host names another
interface; bind other interfaces only on a trusted network.

Resume: the service cannot restore a trainer's input position (its iterators cannot be
saved): a trainer restarted from its checkpoint reads on from where its job is, or from the
start of the data in a new job.
"""

DISPATCHER_HELP = f"""Run a tf.data service dispatcher: it registers the workers, hands
out jobs, and tells each trainer which workers to read from. Serves until SIGTERM/Ctrl-C
(exit 0).

With --work-dir it is fault tolerant: it journals its state there, and a dispatcher
restarted with the same --work-dir and --port resumes its jobs (workers reconnect on their
own; trainers pause meanwhile).

{NOTES}"""

WORKER_HELP = f"""Run a tf.data service worker: it registers with the dispatcher, runs the
pipelines of the jobs it is given and serves their elements. Start one per spare core or
machine. Serves until SIGTERM/Ctrl-C (exit 0).

It registers as HOST:PORT (the --host it binds and the port it got), the address trainers
connect to; with --host 0.0.0.0 this machine's name.

{NOTES}"""

LOCAL_HELP = f"""Start a dispatcher and N worker processes on this machine (to try the
service out, or to use spare cores), print the address to put in the run file, and serve
until SIGTERM/Ctrl-C, then stop them all. A worker that dies is restarted on its port
(--restarts times): TensorFlow's dispatcher keeps a dead worker's tasks, and trainers wait
until that address serves again. If the dispatcher dies, or a worker once more than
--restarts allows, says which and exits 1.

{NOTES}"""

HostOpt = Annotated[
    str,
    typer.Option("--host", help="Interface to listen on (0.0.0.0: every one; see Security)."),
]
JsonLineOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON line per event on stdout (for scripts).")
]
# Set by `local` on its children: they stop when that process is gone (even after kill -9).
StopWithOpt = Annotated[int | None, typer.Option("--stop-with", hidden=True)]


def register(app: typer.Typer) -> None:
    sub = typer.Typer(no_args_is_help=True)
    app.add_typer(
        sub,
        name="data-service",
        help="The tf.data service's servers: scale input preprocessing out to more cores or "
        "machines.\n\n" + NOTES,
        short_help="Run tf.data service servers: a dispatcher, workers, or both locally.",
    )

    @command(sub, "dispatcher", DISPATCHER_HELP, "Run a tf.data service dispatcher.")
    def dispatcher(
        port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any).")],
        host: HostOpt = "127.0.0.1",
        work_dir: Annotated[
            str | None,
            typer.Option("--work-dir", help="Journal folder: fault tolerant (see above)."),
        ] = None,
        json_out: JsonLineOpt = False,
        stop_with: StopWithOpt = None,
    ) -> None:
        _bind(host)
        from tfperf.service import servers

        with servers.work_dir_held(work_dir):
            served = servers.start_dispatcher(host, port, work_dir)
            detail = f"journal in {work_dir}" if work_dir else ""
            why = servers.serve_until_stopped(
                served, lambda: _announce(served, json_out, detail), stop_with
            )
        _stopped(served, why, json_out)

    @command(sub, "worker", WORKER_HELP, "Run a tf.data service worker.")
    def worker(
        dispatcher: Annotated[
            str, typer.Option("--dispatcher", help="The dispatcher's HOST:PORT.")
        ],
        port: Annotated[
            int, typer.Option("--port", min=0, max=65535, help="Port (0: any free one).")
        ] = 0,
        host: HostOpt = "127.0.0.1",
        timeout: Annotated[
            float,
            typer.Option("--timeout", min=0.1, help="Seconds to wait for the dispatcher."),
        ] = 30.0,
        json_out: JsonLineOpt = False,
        stop_with: StopWithOpt = None,
    ) -> None:
        _bind(host)
        from tfperf.service import servers

        served = servers.start_worker(dispatcher, host, port, timeout)
        detail = f"dispatcher {dispatcher}"
        why = servers.serve_until_stopped(
            served, lambda: _announce(served, json_out, detail), stop_with
        )
        _stopped(served, why, json_out)

    @command(sub, "local", LOCAL_HELP, "Start a dispatcher and N workers on this machine.")
    def local(
        workers: Annotated[int, typer.Option("--workers", min=1, help="Worker processes.")],
        port: Annotated[
            int, typer.Option("--port", min=0, max=65535, help="Dispatcher port (0: any).")
        ] = 0,
        host: HostOpt = "127.0.0.1",
        work_dir: Annotated[
            str | None, typer.Option("--work-dir", help="The dispatcher's journal folder.")
        ] = None,
        timeout: Annotated[
            float, typer.Option("--timeout", min=1, help="Seconds for each server to start.")
        ] = 120.0,
        restarts: Annotated[
            int,
            typer.Option(
                "--restarts",
                min=0,
                help="Times each worker that dies is restarted on its port (then all stop).",
            ),
        ] = 3,
        json_out: JsonLineOpt = False,
    ) -> None:
        _run_local(workers, host, port, work_dir, timeout, restarts, json_out)


def _bind(host: str) -> None:
    """Makes this process's servers listen on `host` only (TensorFlow's bind the wildcard):
    may re-exec this process, so it runs before TensorFlow is imported."""
    from tfperf.util.bind import ensure_bound

    ensure_bound(host)


def _announce(served: Any, json_out: bool, detail: str) -> None:
    from tfperf.service.servers import exposure_warning

    if json_out:
        _json_line({"role": served.role, "address": served.address, "pid": os.getpid()})
    else:
        extra = f" ({detail})" if detail else ""
        stdout_console().print(
            f"data-service {served.role} serving at {served.address}{extra}", markup=False
        )
        console.print("Stop with Ctrl-C or SIGTERM.", highlight=False)
    warning = exposure_warning(served)
    if warning:
        console.print(warning, markup=False, highlight=False, soft_wrap=True)


def _stopped(served: Any, why: str, json_out: bool) -> None:
    if json_out:
        _json_line({"role": served.role, "address": served.address, "stopped": why})
    else:
        stdout_console().print(
            f"data-service {served.role} at {served.address} stopped ({why})", markup=False
        )


def _run_local(
    workers: int,
    host: str,
    port: int,
    work_dir: str | None,
    timeout: float,
    restarts: int,
    json_out: bool,
) -> None:
    import signal

    from tfperf.service.local import ChildDied, LocalCluster

    cluster = LocalCluster(workers, host, port, work_dir, timeout, restarts)
    stop = threading.Event()
    why: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        why.append(signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    failure: Exception | None = None
    try:
        cluster.start()
        _local_ready(cluster, json_out)
        cluster.watch(stop, lambda line: console.print(f"data-service local: {line}", markup=False))
    except (ChildDied, TimeoutError) as exc:
        failure = exc
    finally:
        cluster.stop()
    if failure is not None and not stop.is_set():  # a child ending in a requested stop is fine
        print_error(f"data-service local: {failure}; the others are stopped")
        raise typer.Exit(1)
    _local_stopped(cluster, why, json_out)


def _local_ready(cluster: Any, json_out: bool) -> None:
    if json_out:
        return _json_line(cluster.describe())
    out = stdout_console()
    info = cluster.describe()
    out.print(f"tf.data service on this machine: dispatcher at {cluster.address}", markup=False)
    for i, w in enumerate(info["workers"], 1):
        out.print(f"  worker {i} at {w['address']} (PID {w['pid']})", markup=False)
    out.print(
        f"Put in the run file: pipeline.service.address={cluster.address}\n"
        f"Try: tfperf bench RUNFILE --set pipeline.service.address={cluster.address} "
        "--set pipeline.service.mode=parallel_epochs",
        markup=False,
    )
    console.print("Stop with Ctrl-C or SIGTERM.", highlight=False)


def _local_stopped(cluster: Any, why: list[str], json_out: bool) -> None:
    reason = why[0] if why else "stopped"
    if json_out:
        return _json_line({"address": cluster.address, "stopped": reason})
    stdout_console().print(
        f"data-service local: dispatcher and {plural(cluster.workers, 'worker')} stopped "
        f"({reason})",
        markup=False,
    )


def _json_line(data: dict[str, Any]) -> None:
    # One line (not print_json's indented block): a parent process reads it with readline().
    out = report_stream()
    out.write(json.dumps(data) + "\n")
    out.flush()
