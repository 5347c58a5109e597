"""inputs/datasets.py: a run file's data section turned into datasets on tiny real shards:
where the data is, the label split from the features, a fixed thread pool, a user's own
`module:function` called with only the arguments it declares, the shards a pipeline reads
(and the records a corrupt one drops each epoch) and the mistakes named by their run-file
key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tfperf.config import config_from_dict, load_config
from tfperf.errors import UserError
from tfperf.inputs.datasets import (
    data_dir,
    make_input_dataset,
    open_source,
    skipped_per_epoch,
    split_shards,
    workload_of,
)
from tfperf.inputs.user_code import UserCodeError

from helpers import trainkit

N = 24


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return trainkit.write_data(tmp_path_factory.mktemp("inputs") / "data", n=N, shards=2)


def _cfg(data: Path, **pipeline) -> object:
    doc = {"data": {"dir": str(data), "label": "y"}, "pipeline": {"batch_size": 5, **pipeline}}
    return config_from_dict(doc)


def test_where_the_data_is(tmp_path):
    (tmp_path / "run.yaml").write_text("data:\n  dir: shards\n")
    assert data_dir(load_config(tmp_path / "run.yaml")) == tmp_path / "shards"  # beside it
    assert data_dir(config_from_dict({"workload": "chess"})) == Path("runs/chess/data")
    with pytest.raises(UserError, match="data.dir: expected a directory with manifest.json"):
        data_dir(config_from_dict({}))


def test_the_label_is_split_from_the_features(data):
    cfg = _cfg(data, repeat=False, shuffle_files=False)
    batches = list(make_input_dataset(cfg, training=False, split="train"))
    features, labels = batches[0]
    assert sorted(features) == ["id", "x"] and features["x"].shape == (5, trainkit.DIM)
    assert labels.shape == (5,)
    ids = sorted(int(i) for f, _ in batches for i in f["id"].numpy())
    assert ids == list(range(1, N + 1))  # evaluation keeps the last partial batch
    for f, y in batches:  # each label is the one written for its row
        assert list(y.numpy()) == [float(v > 0) for v in f["x"].numpy().sum(axis=1)]


def test_a_label_not_in_the_schema_is_named(data):
    cfg = config_from_dict({"data": {"dir": str(data), "label": "target"}})
    with pytest.raises(UserError, match=r"data.label: expected one of .*found 'target'"):
        make_input_dataset(cfg, training=True)
    cfg = config_from_dict({"data": {"dir": str(data), "label": "t" * 10_000}})
    with pytest.raises(UserError, match=r"found 'tttt.*'\.\.\. \(9,800 characters cut\)$"):
        make_input_dataset(cfg, training=True)


def test_a_fixed_thread_count_runs_on_a_private_pool(data):
    ds = make_input_dataset(_cfg(data, threads=2), training=True)
    assert ds.options().threading.private_threadpool_size == 2
    assert ds.options().threading.max_intra_op_parallelism == 1
    auto = make_input_dataset(_cfg(data), training=True)
    assert auto.options().threading.private_threadpool_size is None


def test_the_shards_a_pipeline_reads(data):
    shards = split_shards(_cfg(data), training=True)
    assert shards.split == "train" and len(shards.files) == 2
    assert shards.total_records == N and shards.records == [N // 2, N // 2]
    assert shards.record_bytes == pytest.approx(
        sum(Path(f).stat().st_size for f in shards.files) / N
    )
    assert skipped_per_epoch(_cfg(data, on_corrupt="skip")) == 0  # every shard reads to its end
    assert open_source(_cfg(data)).records("train") == N


def test_a_users_pipeline_gets_only_the_arguments_it_declares(tmp_path):
    (tmp_path / "my_inputs_ds.py").write_text(
        "import tensorflow as tf\n"
        "def make(batch_size, training):\n"
        "    x = tf.data.Dataset.range(10).map(lambda i: (tf.cast(i, tf.float32), i % 2))\n"
        "    return x.batch(batch_size).repeat() if training else x.batch(batch_size)\n"
        "def numbers(batch_size):\n"
        "    return [1, 2, 3]\n"
        "def broken():\n"
        "    raise ValueError('no such bucket')\n"
    )
    run = tmp_path / "run.yaml"
    run.write_text("data:\n  pipeline: my_inputs_ds:make\npipeline:\n  batch_size: 4\n")
    cfg = load_config(run)
    assert [len(x) for x, _ in make_input_dataset(cfg, training=False)] == [4, 4, 2]
    assert split_shards(cfg, training=True) is None  # tfperf does not know its files
    with pytest.raises(UserError, match="must return a tf.data.Dataset, found list"):
        make_input_dataset(load_config(run, ["data.pipeline=my_inputs_ds:numbers"]), training=True)
    with pytest.raises(UserCodeError) as err:
        make_input_dataset(load_config(run, ["data.pipeline=my_inputs_ds:broken"]), training=True)
    msg = str(err.value)
    assert "data.pipeline: building the training dataset, my_inputs_ds:broken raised" in msg
    assert "ValueError: no such bucket" in msg and "my_inputs_ds.py, line 8, in broken" in msg


def test_mistakes_in_the_data_section_are_named(tmp_path, data):
    missing = {"workload": "chess", "data": {"dir": str(tmp_path / "none")}}
    with pytest.raises(UserError, match="no data yet; run `tfperf convert --workload chess"):
        open_source(config_from_dict(missing))
    with pytest.raises(UserError, match="data.variant: 'original' needs a built-in workload"):
        make_input_dataset(_cfg(data), training=True, variant="original")
    cfg = config_from_dict({"workload": "chess"})
    assert workload_of(cfg).name == "chess" and workload_of(_cfg(data)) is None
    bad = config_from_dict({"workload": "chess", "workload_options": {"no_such_knob": 1}})
    with pytest.raises(UserError, match="workload_options for 'chess'"):
        workload_of(bad)


def test_records_a_corrupt_shard_drops_each_epoch_are_counted(data, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    shard = sorted(copy.glob("train.tfrecord-*"))[1]
    raw = bytearray(shard.read_bytes())
    size = len(raw) // (N // 2)  # the shard's records are all the same size
    raw[9 * size + size // 2] ^= 0xFF  # record 9's data: its CRC fails
    shard.write_bytes(bytes(raw))
    assert skipped_per_epoch(_cfg(copy, on_corrupt="skip")) == N // 2 - 9  # 9 read, 3 lost
