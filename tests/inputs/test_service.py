"""inputs/service.py through make_input_dataset, against a real tf.data service (the
session's: a dispatcher and 2 workers, separate processes on 127.0.0.1): distributed_epoch
yields each example id exactly once per epoch (file splits), parallel_epochs once per
worker, evaluation once; prefixes stay local; an unreachable dispatcher is an error within
pipeline.service.timeout; several trainer processes without a job_name, and remote:
preprocess for a user's function, are named errors."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tfperf.config import config_from_dict
from tfperf.inputs.datasets import make_input_dataset
from tfperf.inputs.service import ServiceError

from helpers import service_cluster, trainkit

N = 240  # 8 shards of 30 records: with batches of 10 no worker drops a remainder


@pytest.fixture
def address(shared_data_service: str) -> str:
    return shared_data_service  # each test reads a job of its own


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return trainkit.write_data(tmp_path_factory.mktemp("ids") / "data", n=N, shards=8)


def _cfg(data, address, mode="distributed_epoch", **service):
    doc = {
        "data": {"dir": str(data), "label": "y"},
        "pipeline": {
            "batch_size": 10,
            "shuffle_buffer": 16,
            "seed": 1,
            "repeat": False,  # one epoch, to count it
            "service": {"address": address, "mode": mode, "timeout": 60, **service},
        },
    }
    return config_from_dict(doc)


def _ids(ds) -> Counter:
    return Counter(int(i) for features, _ in ds for i in features["id"].numpy())


def test_distributed_epoch_reads_each_example_exactly_once(data, address):
    for remote in ("all", "preprocess"):
        ds = make_input_dataset(_cfg(data, address, remote=remote), training=True)
        graph = str(ds._as_serialized_graph().numpy())
        assert "DataServiceDataset" in graph and "TFRecordDataset" not in graph  # all remote
        ids = _ids(ds)
        assert sorted(ids) == list(range(1, N + 1)) and set(ids.values()) == {1}, remote


def test_parallel_epochs_serves_the_whole_data_from_each_worker(data, address):
    cfg = _cfg(data, address, mode="parallel_epochs")
    ids = _ids(make_input_dataset(cfg, training=True))
    assert sorted(ids) == list(range(1, N + 1)) and set(ids.values()) == {2}  # 2 workers
    # Evaluation reads each example once whatever the training mode (file splits too).
    evaluation = _ids(make_input_dataset(cfg, training=False, split="train"))
    assert sorted(evaluation) == list(range(1, N + 1)) and set(evaluation.values()) == {1}
    # bench's and the doctor's stage prefixes run here, not on the service.
    prefix = make_input_dataset(cfg, training=True, stop_after="parse")
    assert "DataServiceDataset" not in str(prefix._as_serialized_graph().numpy())


def test_an_unreachable_dispatcher_is_an_error_within_the_timeout(data):
    port = service_cluster.free_port()  # nothing listens there
    cfg = _cfg(data, f"grpc://127.0.0.1:{port}", mode="parallel_epochs", timeout=2)
    started = time.monotonic()
    with pytest.raises(ServiceError) as err:
        make_input_dataset(cfg, training=True)
    assert time.monotonic() - started < 15  # TensorFlow alone would retry for an hour
    text = str(err.value)
    assert f"127.0.0.1:{port}" in text and "pipeline.service.timeout" in text, text
    assert "no tf.data dispatcher answered" in text


def test_several_trainers_need_a_job_name_and_user_batches_stay_theirs(data, tmp_path):
    import tensorflow as tf

    cfg = _cfg(data, "127.0.0.1:1", mode="parallel_epochs")
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=0)
    with pytest.raises(ServiceError, match="pipeline.service.job_name"):
        make_input_dataset(cfg, training=True, input_context=ctx)
    (tmp_path / "mypipe.py").write_text(
        "import tensorflow as tf\n"
        "def make(batch_size):\n"
        "    return tf.data.Dataset.range(100).batch(batch_size).prefetch(2)\n"
    )
    run = tmp_path / "run.yaml"
    run.write_text("data:\n  pipeline: mypipe:make\n")
    user = cfg.model_copy(update={"data": cfg.data.model_copy(update={"pipeline": "mypipe:make"})})
    user.source = str(run)
    user.pipeline.service.remote = "preprocess"
    with pytest.raises(ServiceError, match="remote: 'preprocess' needs tfperf's own pipeline"):
        make_input_dataset(user, training=True)
    # A pipeline calling Python: the workers get its graph only (said before any contact).
    (tmp_path / "pypipe.py").write_text(
        "import tensorflow as tf\n"
        "def make(batch_size):\n"
        "    py = lambda x: tf.py_function(lambda v: v, [x], tf.int64)\n"
        "    ds = tf.data.Dataset.range(10).map(py)\n"
        "    return ds.batch(batch_size)\n"
    )
    py = user.model_copy(update={"data": user.data.model_copy(update={"pipeline": "pypipe:make"})})
    py.pipeline.service.remote = "all"
    with pytest.raises(ServiceError, match=r"pypipe:make calls Python \(EagerPyFunc"):
        make_input_dataset(py, training=True)


def test_a_user_pipeline_runs_on_the_service_up_to_its_prefetch(data, address, tmp_path):
    (tmp_path / "mypipe2.py").write_text(
        "import tensorflow as tf\n"
        "def make(batch_size):\n"
        "    ds = tf.data.Dataset.range(60).batch(batch_size).prefetch(2)\n"
        "    return ds.with_options(tf.data.Options())\n"
    )
    run = tmp_path / "run.yaml"
    run.write_text("data:\n  pipeline: mypipe2:make\n")
    cfg = _cfg(data, address, mode="parallel_epochs")
    cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"pipeline": "mypipe2:make"})})
    cfg.source = str(run)
    ds = make_input_dataset(cfg, training=True)
    values = Counter(int(v) for batch in ds for v in batch.numpy())
    assert sorted(values) == list(range(60)) and set(values.values()) == {2}  # 2 workers


def test_relative_shard_paths_reach_the_workers(data, address, monkeypatch):
    monkeypatch.chdir(data.parent)  # the workers run in another folder
    ids = _ids(make_input_dataset(_cfg(Path(data.name), address), training=True))
    assert sorted(ids) == list(range(1, N + 1))


def test_two_trainers_share_one_job_by_job_name(data, address):
    import tensorflow as tf

    # Two trainer processes' input pipelines (ids 0 and 1): the service, not input_context,
    # splits the data, so together they read each example once.
    cfg = _cfg(data, address, job_name="shared-ids")
    contexts = [tf.distribute.InputContext(2, i, 1) for i in range(2)]
    live = [iter(make_input_dataset(cfg, training=True, input_context=c)) for c in contexts]
    ids: Counter = Counter()
    while live:
        for it in list(live):
            try:
                features, _ = next(it)
            except StopIteration:
                live.remove(it)
                continue
            ids.update(int(i) for i in features["id"].numpy())
    assert sorted(ids) == list(range(1, N + 1)) and set(ids.values()) == {1}
