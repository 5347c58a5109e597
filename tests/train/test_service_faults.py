"""Faults of a tf.data service under a real `tfperf train` (every process real, on 127.0.0.1 at
free ports): a worker killed with kill -9 mid-epoch and brought back at its address (as a
supervisor would: TensorFlow keeps a dead worker's tasks, so its clients wait for that
address) - distributed_epoch reports the examples the epoch lost, checked against the ids
the model trained on, parallel_epochs loses none; a worker added mid-run is read from by
the trainer (both worker faults are acted once on one service, under a trainer of each
mode at once, and two tests assert on that run); the dispatcher restarted with --work-dir
is a logged pause after which the job goes on where it was (every epoch's ids once; a
second dispatcher on its journal is refused); a killed trainer resumes from its
checkpoint."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from helpers import servicekit, trainkit

N, SHARDS, BATCH = 512, 16, 8
EPOCH_STEPS = N // BATCH
# The kill test's epoch is far larger than what the workers and the client buffer (a few
# dozen batches), so a worker killed early always holds unserved examples of that epoch.
BIG_N, BIG_SHARDS = 2048, 32
pytestmark = pytest.mark.slow  # a service of several processes and a trainer process


def _with_service(mode: str, address: str) -> list[str]:
    return [
        "--set",
        f"pipeline.service.address={address}",
        "--set",
        f"pipeline.service.mode={mode}",
    ]


def _trained_ids(log: Path) -> list[list[int]]:
    return [[int(i) for i in line.split()] for line in log.read_text().splitlines()]


def _still_training(proc) -> None:
    assert proc.poll() is None, f"train ended early: {proc.communicate()[1][-3000:]}"


def _wait_steps(log: Path, steps: int, proc, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= steps:
            return
        _still_training(proc)
        time.sleep(0.2)
    raise AssertionError(f"train did not reach step {steps} in {timeout} s")


def _finish(proc, timeout: float = 600) -> tuple[dict, str]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-4000:]
    return json.loads(out), err


def _train(
    tmp_path: Path,
    steps: int,
    mode: str,
    address: str,
    log: Path,
    n: int = N,
    shards: int = SHARDS,
    pause_while: Path | None = None,
    pause: float = 0.1,
    checkpoint_every: int = 512,
):
    data = trainkit.write_data(tmp_path / "data", n=n, shards=shards)
    rf = trainkit.write_runfile(
        tmp_path,
        data,
        model="tinymodels:with_ids",
        steps_per_loop=1,
        # No checkpoint before the end unless the test resumes from one (one save: ~45 ms).
        checkpoint={"every_steps": checkpoint_every},
        # Scalars every 64 steps, not every step: per-step summaries took two thirds of a
        # 512-step run's time (input/* tags are still written, at the logged steps; the
        # pauses and lost examples are watched at every step whatever this says).
        log_every=64,
        histogram_every=512,
    )
    args = ["--json", "--max-steps", str(steps), *_with_service(mode, address)]
    return rf, args, trainkit.start_train(rf, log, *args, pause=pause, pause_while=pause_while)


def _serve(procs, tmp_path: Path, *args: object):
    """`tfperf data-service ARGS` started with the bind shim preloaded (its re-execution
    under the shim skipped: binding is not what these tests are about)."""
    return servicekit.start(procs, tmp_path, *args, env=servicekit.preloaded_env())


def _worker(procs, tmp_path: Path, dispatcher, port: int):
    args = ("worker", "--dispatcher", dispatcher.target, "--port", port, "--timeout", 120)
    return _serve(procs, tmp_path, *args)


def _kill_and_restart(procs, tmp_path: Path, dispatcher, worker, port: int):
    """kill -9, then the same worker address again (as a supervisor restarts it): TensorFlow
    keeps a dead worker's tasks, so its clients wait until that address serves again."""
    worker.popen.send_signal(signal.SIGKILL)
    worker.popen.wait(timeout=60)
    return _worker(procs, tmp_path, dispatcher, port)


def _wait_reading_a_shard(worker, data: Path, train, timeout: float = 120) -> None:
    """Until `worker` has a shard of `data` open: it holds that split's unserved examples (a
    worker slow to build its task's pipeline may not have read any split yet)."""
    deadline = time.monotonic() + timeout
    watched = psutil.Process(worker.popen.pid)
    while time.monotonic() < deadline:
        if any(Path(f.path).parent == data for f in watched.open_files()):
            return
        _still_training(train)
        time.sleep(0.02)
    raise AssertionError(f"worker {worker.address} opened no shard of {data} in {timeout} s")


@pytest.fixture(scope="module")
def worker_faults(tmp_path_factory):
    """One dispatcher, one worker, and two trainers reading it at once (distributed_epoch on
    the big data, parallel_epochs on the small): a second worker added mid-run (the
    parallel_epochs trainer must read from it), then the first killed with kill -9 while it
    holds a shard of the big epoch, and brought back at its port. Both trainers see both
    faults; each test below asserts on its own trainer's run (the service's four processes
    are paid once, not once per mode)."""
    tmp = tmp_path_factory.mktemp("worker_faults")
    held = tmp / "hold"
    epoch_dir, parallel_dir = tmp / "epoch", tmp / "parallel"
    epoch_dir.mkdir()
    parallel_dir.mkdir()
    epoch_log, parallel_log = epoch_dir / "ids.txt", parallel_dir / "ids.txt"
    # 6 epochs of held steps (77 s): starved by a suite beside it, the added worker's start
    # outlasted 3 (the trainer ended before it read from it); after the faults they run fast.
    epoch_steps, parallel_steps = 2 * BIG_N // BATCH, 6 * EPOCH_STEPS
    ports = [servicekit.free_port(), servicekit.free_port()]
    held.touch()  # slow steps until the faults are done, then full speed
    with servicekit.processes() as procs:
        dispatcher = _serve(procs, tmp, "dispatcher", "--port", 0)
        first = _worker(procs, tmp, dispatcher, ports[0])
        address = dispatcher.address
        # 0.2 s per held step: each run must outlast the faults' acting (the added worker's
        # TensorFlow start beside two trainers), the big one staying within its 2 epochs.
        big = {"n": BIG_N, "shards": BIG_SHARDS, "pause_while": held, "pause": 0.2}
        *_, epoch_train = _train(
            epoch_dir, epoch_steps, "distributed_epoch", address, epoch_log, **big
        )
        *_, parallel_train = _train(
            parallel_dir,
            parallel_steps,
            "parallel_epochs",
            address,
            parallel_log,
            pause_while=held,
            pause=0.2,
        )
        trainers = [epoch_train, parallel_train]
        try:
            _wait_steps(epoch_log, 16, epoch_train)
            _wait_steps(parallel_log, 10, parallel_train)
            _worker(procs, tmp, dispatcher, ports[1])  # added mid-run
            deadline = time.monotonic() + 120
            while not _connected(parallel_train.pid, ports[1]):  # the trainer reads from it
                assert time.monotonic() < deadline, "never read from it"
                _still_training(parallel_train)
                time.sleep(0.5)
            served_at = len(_trained_ids(parallel_log))
            _wait_reading_a_shard(first, epoch_dir / "data", epoch_train)
            _kill_and_restart(procs, tmp, dispatcher, first, ports[0])  # mid-epoch
            held.unlink()
            epoch_run, parallel_run = _finish(epoch_train), _finish(parallel_train)
        finally:
            for train in trainers:  # only the trainers started here, by their own handles
                if train.poll() is None:
                    train.kill()
                    train.communicate(timeout=60)
    return {
        "epoch": (*epoch_run, epoch_log, epoch_steps),
        "parallel": (*parallel_run, served_at, parallel_steps),
    }


def test_worker_killed_mid_epoch_distributed_epoch_reports_what_the_epoch_lost(worker_faults):
    result, err, log, steps = worker_faults["epoch"]
    assert result["steps"] == steps  # training went on
    svc = result["service"]
    lost = [e for e in svc["epochs"] if e["lost"]]
    assert svc["mode"] == "distributed_epoch" and svc["lost"] > 0 and lost, (
        json.dumps(svc) + err[-3000:]
    )
    assert all(e["received"] + e["lost"] == BIG_N for e in svc["epochs"]), svc
    assert f"{lost[0]['lost']} lost" in err and "at most once" in err
    _assert_input_tags(Path(result["log_dir"]) / "train")
    # The counts against what the model trained on: the stream cut into the epochs' sizes,
    # each a set of distinct ids missing exactly the epoch's lost examples.
    stream = [i for batch in _trained_ids(log) for i in batch]
    start = 0
    for epoch in svc["epochs"]:
        chunk = stream[start : start + epoch["received"]]
        start += epoch["received"]
        if len(chunk) < epoch["received"]:
            break  # counted on receipt, trained later
        assert len(set(chunk)) == len(chunk), f"an id twice in epoch {epoch['epoch']}"
        assert len(set(range(1, BIG_N + 1)) - set(chunk)) == epoch["lost"], epoch


def _assert_input_tags(logs: Path) -> None:
    """input/* keep working through the service: client wait per step, elements buffered."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logs), size_guidance={"tensors": 0})
    acc.Reload()
    tags = set(acc.Tags()["tensors"])
    expected = {"input/wait_ms", "input/wait_fraction", "input/buffered", "input/service_lost"}
    assert expected <= tags, expected - tags


def _connected(pid: int, port: int) -> bool:
    """Whether process `pid` has a TCP connection to 127.0.0.1:`port` (the client's view)."""
    conns = psutil.Process(pid).net_connections(kind="tcp")
    return any(c.raddr and c.raddr.port == port and c.status == "ESTABLISHED" for c in conns)


def test_parallel_epochs_loses_nothing_and_an_added_worker_serves(worker_faults):
    result, _, served_at, steps = worker_faults["parallel"]
    assert served_at < steps and result["steps"] == steps, (served_at, result["steps"])
    svc = result["service"]
    assert svc["mode"] == "parallel_epochs" and svc["lost"] == 0
    assert "every worker serves every example" in svc["note"]


def test_dispatcher_restart_is_a_logged_pause(tmp_path):
    log, held = tmp_path / "ids.txt", tmp_path / "hold"
    steps = 2 * EPOCH_STEPS  # the epoch the restart cuts, and one after it
    work_dir, port = tmp_path / "journal", servicekit.free_port()
    args = ("dispatcher", "--port", port, "--work-dir", work_dir)
    held.touch()  # slow steps until the dispatcher is back, then full speed
    with servicekit.processes() as procs:
        dispatcher = _serve(procs, tmp_path, *args)
        # One journal, one dispatcher: a second one on the same --work-dir is refused.
        again = ("dispatcher", "--port", servicekit.free_port(), "--work-dir", work_dir)
        res = servicekit.run_tfperf("data-service", *again, env=servicekit.preloaded_env())
        assert res.returncode == 2 and "--work-dir" in res.stderr and "in use by" in res.stderr
        # One worker: the journal, not the workers, is what carries the job over the restart
        # (a job started over would serve ids twice all the same).
        _worker(procs, tmp_path, dispatcher, 0)
        address = dispatcher.address
        _, _, train = _train(tmp_path, steps, "distributed_epoch", address, log, pause_while=held)
        _wait_steps(log, EPOCH_STEPS // 2, train)
        assert servicekit.stop(dispatcher) == 0, dispatcher.err()
        time.sleep(3)
        again = _serve(procs, tmp_path, *args)
        assert again.address == dispatcher.address
        held.unlink()
        result, err = _finish(train)

    assert result["steps"] == steps
    svc = result["service"]
    pauses = svc["pauses"]
    assert pauses and max(p["seconds"] for p in pauses) >= 3, svc
    line = next(x for x in err.splitlines() if x.startswith("input paused"))
    assert f"service at {dispatcher.address}" in line
    # The job went on where it was: the epoch cut by the restart holds every id once (a job
    # started over would have served some twice), and so does every epoch after it.
    assert svc["lost"] == 0 and svc["epochs"], svc
    stream = [i for batch in _trained_ids(log) for i in batch]
    for e in range(steps // EPOCH_STEPS):
        epoch = stream[e * N : (e + 1) * N]
        assert sorted(epoch) == list(range(1, N + 1)), f"epoch {e}: {len(set(epoch))} ids"


def test_a_killed_trainer_resumes_from_its_checkpoint(tmp_path, monkeypatch, shared_data_service):
    # The service is the session's: only the trainer is faulted here.
    log = tmp_path / "ids.txt"
    steps = 2 * EPOCH_STEPS
    address = shared_data_service
    rf, args, train = _train(
        tmp_path, steps, "distributed_epoch", address, log, checkpoint_every=16
    )
    try:
        _wait_steps(log, 40, train)  # past the checkpoint at step 32
    finally:
        train.send_signal(signal.SIGKILL)  # the process this test started
        train.communicate(timeout=60)
    # The restart runs in this process (nothing left to act on: the kill was the point).
    monkeypatch.setenv("IDS_LOG", str(log))
    monkeypatch.setenv("IDS_PAUSE", "0")
    again = trainkit.tfperf_here("train", rf, "--no-progress", *args)
    result, err = json.loads(again.stdout), again.stderr

    assert result["start_step"] >= 32 and result["steps"] == steps, result
    assert result["restored_from"] and "not its input position" in err
    help_text = " ".join(trainkit.tfperf_here("train", "--help").stdout.replace("│", " ").split())
    assert "restores the model, optimizer and step, not the input position" in help_text
