"""Tiny real data and models for the training tests: TFRecord shards written with
Schema.encode plus a manifest, a module of Keras model factories written beside the run
file (so subprocesses can import it), run files, and the loop's RunState for a hook alone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.hooks import RunState

DIM = 4


def data_schema(with_id: bool = True) -> Schema:
    feats = [Feature(name="x", dtype="float32", shape=(DIM,)), Feature(name="y", dtype="float32")]
    if with_id:
        feats.append(Feature(name="id", dtype="int64"))
    return Schema(features=tuple(feats))


def write_data(
    root: Path, n: int = 64, shards: int = 2, seed: int = 0, with_id: bool = True
) -> Path:
    """n rows, label y = 1 if sum(x) > 0; ids 1..n. Returns the data folder."""
    import tensorflow as tf

    root.mkdir(parents=True, exist_ok=True)
    schema = data_schema(with_id)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM)).astype(np.float32)
    infos = []
    for s in range(shards):
        rows = range(s, n, shards)
        name = f"train.tfrecord-{s:05d}-of-{shards:05d}"
        with tf.io.TFRecordWriter(str(root / name)) as w:
            for i in rows:
                row: dict[str, Any] = {"x": x[i], "y": np.float32(x[i].sum() > 0)}
                if with_id:
                    row["id"] = np.int64(i + 1)
                w.write(schema.encode(row, i))
        size = (root / name).stat().st_size
        infos.append(ShardInfo(file=name, records=len(rows), bytes=size, sha256="-"))
    split = SplitInfo(shards=infos, records=n)
    save_manifest(Manifest(name="tiny", schema=schema, splits={"train": split}), root)
    return root


MODELS = '''
import os
import keras
import tensorflow as tf


def tiny():
    x = keras.Input(shape=(4,), name="x")
    h = keras.layers.Dense(8, activation="relu", name="hidden")(x)
    out = keras.layers.Dense(1, name="logit")(h)
    return keras.Model({"x": x}, out)


def tiny_compiled():
    m = tiny()
    m.compile(optimizer=keras.optimizers.SGD(0.05),
              loss=keras.losses.BinaryCrossentropy(from_logits=True))
    return m


def _log_ids(ids):
    # Appends this step's ids to the file named by IDS_LOG (one line per step); an
    # optional pause per step (IDS_PAUSE seconds) gives a test time to kill the process.
    import time

    ids = ids.numpy().reshape(-1).tolist()
    if any(ids):
        with open(os.environ["IDS_LOG"], "a") as f:
            f.write(" ".join(str(i) for i in ids) + "\\n")
        # IDS_PAUSE_WHILE names a file: the pause lasts only while it exists (the test
        # removes it once it has acted, and the rest of the run goes at full speed).
        held = os.environ.get("IDS_PAUSE_WHILE")
        if held is None or os.path.exists(held):
            time.sleep(float(os.environ.get("IDS_PAUSE", "0")))
    return 0


class IdLogger(keras.layers.Layer):
    def call(self, x, ids):
        done = tf.py_function(_log_ids, [ids], tf.int32)
        with tf.control_dependencies([done]):
            return tf.identity(x)


def with_ids():
    x = keras.Input(shape=(4,), name="x")
    i = keras.Input(shape=(), dtype="int64", name="id")
    logged = IdLogger(name="ids")(x, i)
    h = keras.layers.Dense(8, activation="relu", name="hidden")(logged)
    out = keras.layers.Dense(1, name="logit")(h)
    return keras.Model({"x": x, "id": i}, out)


class Sleep(keras.layers.Layer):
    """Sleeps per call when the global dtype policy is one of SLOW_POLICIES (comma list)."""

    def __init__(self, seconds, **kw):
        super().__init__(**kw)
        self.seconds = seconds

    def call(self, x):
        import time

        def nap(t):
            time.sleep(self.seconds)
            return t

        return tf.py_function(nap, [x], x.dtype)


def slow_for_policy():
    policy = keras.config.dtype_policy().name
    slow = os.environ.get("SLOW_POLICIES", "").split(",")
    x = keras.Input(shape=(4,), name="x")
    h = keras.layers.Dense(8, activation="relu", name="hidden")(x)
    if policy in slow:
        h = Sleep(0.03, name="sleep")(h)
        h = keras.layers.Reshape((8,))(h)
    out = keras.layers.Dense(1, name="logit", dtype="float32")(h)
    return keras.Model({"x": x}, out)


def exploding():
    x = keras.Input(shape=(4,), name="x")
    out = keras.layers.Dense(1, name="logit")(x)
    return keras.Model({"x": x}, out)
'''


def write_models(folder: Path) -> None:
    (folder / "tinymodels.py").write_text(MODELS)


def write_runfile(folder: Path, data: Path, model: str = "tinymodels:tiny", **train: Any) -> Path:
    """A run file for the tiny data; `train` entries go to the train section."""
    write_models(folder)
    doc = {
        "data": {"dir": str(data), "label": "y"},
        "pipeline": {"batch_size": 8, "shuffle_buffer": 16, "seed": 1},
        "model": {"name": model, "loss": "binary_crossentropy_from_logits", "learning_rate": 0.05},
        "train": {
            "out_dir": str(folder / "run"),
            "monitor_system": False,
            "log_every": 1,
            "histogram_every": 5,
            **train,
        },
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run_state(
    out_dir: Path | None = None, step: int = 0, cfg: Any = None, logs: bool = False
) -> RunState:
    """The loop's RunState for a hook alone: no model, optimizer or strategy, 8 examples per
    step; a TensorBoard writer in `out_dir`/logs when `logs`."""
    train_writer = None
    if logs:
        import tensorflow as tf

        train_writer = tf.summary.create_file_writer(str(out_dir / "logs"))
    return RunState(
        cfg=cfg,
        model=None,
        optimizer=None,
        strategy=None,
        step=step,
        out_dir=out_dir,
        train_writer=train_writer,
        examples_per_step=8,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tfperf(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240, check: bool = True
) -> subprocess.CompletedProcess:
    """Runs the real `tfperf` command line in a fresh process."""
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "tfperf.cli.main", *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"tfperf {' '.join(args)} -> {proc.returncode}\n{proc.stderr}")
    return proc


def tfperf_here(*args: object, check: bool = True) -> subprocess.CompletedProcess:
    """`tfperf ARGS...` through its command-line app in this process (no TensorFlow start-up
    per command; for tests not about the process), as `tfperf` returns it; an exception the
    app does not turn into an exit is raised."""
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    argv = [str(a) for a in args]
    res = CliRunner().invoke(app, argv)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    proc = subprocess.CompletedProcess(argv, res.exit_code, res.stdout, res.stderr)
    if check and proc.returncode != 0:
        raise AssertionError(f"tfperf {' '.join(argv)} -> {proc.returncode}\n{proc.stderr}")
    return proc


def start_train(
    runfile: Path, ids_log: Path, *args: str, pause: float = 0.1, pause_while: Path | None = None
) -> subprocess.Popen:
    """A real `tfperf train` in the background, logging the example ids it trains on to
    `ids_log` and pausing `pause` s per step (the with_ids model), so a test can act mid-run;
    with `pause_while`, only while that file exists."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "IDS_LOG": str(ids_log)}
    env["IDS_PAUSE"] = str(pause)
    if pause_while is not None:
        env["IDS_PAUSE_WHILE"] = str(pause_while)
    return subprocess.Popen(
        [sys.executable, "-m", "tfperf.cli.main", "train", str(runfile), "--no-progress", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def listening_while_running(
    watched: list[tuple[subprocess.Popen, int]], timeout: float = 240
) -> dict[int, list[str]]:
    """{port: the addresses the OS shows process listening on there} for each (process, port),
    polled while the processes run, until every one listens (or all have exited)."""
    import time

    import psutil

    from tfperf.util.net import listening_addresses

    seen: dict[int, list[str]] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(watched) and time.monotonic() < deadline:
        for proc, port in watched:
            if port in seen or proc.poll() is not None:
                continue
            try:
                where = listening_addresses(port, proc.pid)
            except psutil.NoSuchProcess:
                continue
            if where:
                seen[port] = where
        if all(p.poll() is not None for p, _ in watched):
            break
        time.sleep(0.05)
    return seen
