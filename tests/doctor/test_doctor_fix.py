"""`tfperf doctor --fix`: graph rewrites of any dataset and run-file changes of tfperf
pipelines are measured, kept only when they help, and never change the examples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from rich.console import Console

from tfperf.config import config_from_dict, load_config
from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.doctor.diagnosis.diagnose import diagnose
from tfperf.doctor.fix.entry import fix_pipeline
from tfperf.doctor.graph import lint
from tfperf.doctor.report.render import render_fix
from tfperf.doctor.rewrites.edits import (
    batch_before_map,
    example_multiset,
    same_examples,
    set_deterministic,
)
from tfperf.inputs.datasets import make_input_dataset

from helpers import slow_pipelines as sp

FAST = {"steps": 4, "warmup": 2, "repeats": 2, "min_seconds": 0.05, "what_ifs": []}


def test_same_examples_compares_multisets_across_batching():
    ds = tf.data.Dataset.range(10)
    assert same_examples(ds.batch(3), ds.shuffle(10, seed=1).batch(4))
    assert not same_examples(ds.batch(3), ds.map(lambda x: x + 1).batch(3))
    assert not same_examples(ds, ds.take(9))
    assert sum(example_multiset(ds.batch(4)).values()) == 10


def test_batch_before_map_moves_a_polymorphic_map():
    ds = tf.data.Dataset.range(12).map(lambda x: tf.cast(x, tf.float32) * 2.0 + 1.0).batch(4)
    g = lint.read_graph(ds)
    moved, label = batch_before_map(g, ds)
    kinds = [s.kind for s in lint.read_graph(moved).stages]
    assert kinds.index("batch") < kinds.index("map")
    assert "vectorized" in label
    assert [list(b.numpy()) for b in moved] == [list(b.numpy()) for b in ds]


def test_batch_before_map_breaks_a_per_example_only_map():
    ds = tf.data.Dataset.range(8).map(lambda x: tf.reshape(tf.cast(x, tf.float32), [1]))
    ds = ds.batch(4)
    moved, _ = batch_before_map(lint.read_graph(ds), ds)
    # reshape([4] -> [1]) cannot take a batch: the rewrite fails, so --fix would not keep it
    with pytest.raises(tf.errors.InvalidArgumentError):
        list(moved)


def test_set_deterministic_rewrites_attrs_and_keeps_examples():
    ds = tf.data.Dataset.range(50).map(lambda x: x * 2, num_parallel_calls=2, deterministic=True)
    nd = set_deterministic(lint.read_graph(ds), ds, False)
    assert [s.deterministic for s in lint.read_graph(nd).stages if s.kind == "map"] == ["false"]
    assert same_examples(ds, nd)


def test_fix_any_dataset_keeps_the_multiset(tmp_path):
    cfg = config_from_dict(
        {
            "data": {"pipeline": "helpers.slow_pipelines:fixable"},
            "model": {"name": "helpers.slow_pipelines:tiny_model", "loss": "mse"},
            "pipeline": {"batch_size": 32},
            "doctor": FAST,
        }
    )
    diag = diagnose(cfg)
    assert diag.findings[0].code == "per_example_map"
    result = fix_pipeline(cfg, diag, out=tmp_path / "run.optimized.yaml")
    original = make_input_dataset(cfg, training=True)
    assert same_examples(original, result.dataset)
    # the per-example map runs on whole batches: vectorized by pfor, or moved as it is
    assert {"vectorize per-example maps", "batch before per-example map"} & set(
        result.pipeline_changes
    )
    assert result.after > result.before
    # the module applying the kept rewrites and the run file pointing at it; no prose
    assert [Path(p).name for p in result.written] == ["run.optimized.py", "run.optimized.yaml"]
    assert not (tmp_path / "run.optimized.md").exists()
    names = [t.name for t in result.trials]
    assert "prefetch at the end" in names and "non-deterministic order" in names
    # each trial has its predicted and measured gain, and the table prints the prediction
    trials = result.to_dict()["trials"]
    assert all("predicted" in t and "ratio" in t for t in trials)
    predicted = {t["name"]: t["predicted"] for t in trials}
    assert any(p is not None for p in predicted.values()), predicted
    # the whole fix has the cost model's prediction: the kept changes make it faster
    assert result.predicted is not None and result.predicted > 1.0, result.predicted
    assert result.to_dict()["predicted_speedup"] == result.predicted
    assert diag.to_dict()["costs"]["pipeline_cpu"] > 0
    console = Console(record=True, width=200)
    render_fix(result, console)
    assert f"predicted ~{result.predicted:.2f}x" in console.export_text()


def write_tfperf_data(root: Path, n: int = 512, shards: int = 4) -> Path:
    """Shards plus manifest.json as `tfperf convert` lays them out."""
    schema = Schema.of(
        Feature(name="x", dtype="float32", shape=(sp.DIM,)),
        Feature(name="y", dtype="float32", shape=(1,)),
    )
    x, y = sp.arrays(n)
    root.mkdir(parents=True, exist_ok=True)
    per = n // shards
    infos = []
    for s in range(shards):
        name = f"train.tfrecord-{s:05d}-of-{shards:05d}"
        with tf.io.TFRecordWriter(str(root / name)) as w:
            for i in range(s * per, (s + 1) * per):
                w.write(schema.encode({"x": x[i], "y": y[i]}))
        infos.append(
            ShardInfo(file=name, records=per, bytes=(root / name).stat().st_size, sha256="0" * 64)
        )
    split = SplitInfo(shards=infos, records=per * shards)
    save_manifest(Manifest(name="t", schema=schema, splits={"train": split, "eval": split}), root)
    return root


def test_fix_run_file_writes_an_optimized_run_file(tmp_path):
    write_tfperf_data(tmp_path / "data")
    run = tmp_path / "run.yaml"
    run.write_text(
        "data:\n  dir: data\n  label: y\n"
        "model:\n  name: helpers.slow_pipelines:tiny_model\n  loss: mse\n"
        "pipeline:\n  batch_size: 32\n  parse: per_example\n  preprocess_parallelism: 1\n"
        "  prefetch: 1\n  shuffle_buffer: 64\n"
        f"doctor: {FAST}\n"
    )
    cfg = load_config(run)
    diag = diagnose(cfg)
    out = tmp_path / "run.optimized.yaml"
    result = fix_pipeline(cfg, diag, out=out)
    # per-example parse, one preprocessing thread, prefetch 1: something helps
    assert result.run_file_changes, result.trials
    assert result.written == [str(out)] and out.exists()
    fixed = load_config(out)
    assert fixed.data.label == "y" and fixed.pipeline.batch_size == 32
    # every kept change is in the written file, and each trial is listed in its header
    for key, value in result.run_file_changes.items():
        section, name = key.split(".")
        assert getattr(getattr(fixed, section), name) == value
    assert "batched parse" in [t.name for t in result.trials]
    assert out.read_text().startswith("# written by `tfperf doctor --fix`")
    # the same examples in one (evaluation-order) pass, whatever was kept
    fixed.source = cfg.source
    a = make_input_dataset(cfg, training=False)
    b = make_input_dataset(fixed, training=False)
    assert same_examples(a, b)
    assert sum(example_multiset(b).values()) == 512


def test_fix_trials_never_keep_a_change_that_alters_examples(tmp_path):
    x = np.arange(64, dtype="float32").reshape(64, 1).repeat(sp.DIM, axis=1)
    ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).map(lambda a, b: (a, b)).batch(8)
    g = lint.read_graph(ds)
    moved = batch_before_map(g, ds)[0]
    assert same_examples(ds, moved)


# ---- the optimized run file works wherever it is written -----------------------------------
PATHS = {
    "data.dir": "data",
    "train.out_dir": "out/run1",
    "train.init_from": "../ckpt/ckpt-3",
    "train.cluster": "/etc/cluster.yaml",
    "pipeline.cache_records": "cache/records",
    "pipeline.cache_preprocessed": True,
}


def _value(cfg, key: str):
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def test_relocate_paths_names_the_same_files_from_the_new_folder(tmp_path):
    from tfperf.config import dump_config
    from tfperf.doctor.fix.runfile import relocate_paths

    run = tmp_path / "proj" / "run.yaml"
    run.parent.mkdir()
    sections: dict = {}
    for key, value in PATHS.items():
        section, name = key.split(".")
        sections.setdefault(section, {})[name] = value
    run.write_text(yaml.safe_dump(sections))
    cfg = load_config(run)
    for out in (
        tmp_path / "elsewhere" / "deep" / "run.optimized.yaml",
        tmp_path / "proj" / "run.optimized.yaml",
    ):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump_config(relocate_paths(cfg, out)))
        moved = load_config(out)
        for key, value in PATHS.items():
            if isinstance(value, str):
                assert moved.resolve(_value(moved, key)) == cfg.resolve(value), key
                assert Path(_value(moved, key)).is_absolute() == value.startswith("/"), key
            else:
                assert _value(moved, key) is value  # a flag is not a path
    assert moved.data.dir == "data" and moved.train.init_from == "../ckpt/ckpt-3"  # same folder
    far = cfg.model_copy()
    far.source = "/srv/project/run.yaml"  # shares only '/' with tmp_path: written absolute
    assert relocate_paths(far, tmp_path / "x.yaml").data.dir == "/srv/project/data"


def test_fix_writes_a_run_file_that_works_in_another_folder(tmp_path):
    from tfperf.doctor.fix.runfile import write_run_file

    write_tfperf_data(tmp_path / "proj" / "data")
    run = tmp_path / "proj" / "run.yaml"
    run.write_text(
        "data:\n  dir: data\n  label: y\n"
        "model:\n  name: helpers.slow_pipelines:tiny_model\n  loss: mse\n"
        "pipeline:\n  batch_size: 32\n  deterministic: false\n  cache_records: true\n"
        "train:\n  out_dir: runs/a\n"
    )
    cfg = load_config(run)
    out = tmp_path / "tuned" / "run.optimized.yaml"
    write_run_file(cfg, {"pipeline.prefetch": "auto"}, out, "# header\n")
    fixed = load_config(out)
    assert fixed.data.dir == "../proj/data"
    assert fixed.resolve(fixed.data.dir) == cfg.resolve(cfg.data.dir)
    assert fixed.resolve(fixed.train.out_dir) == str(tmp_path / "proj" / "runs" / "a")
    b = make_input_dataset(fixed, training=False)  # reads the data from its new place
    assert sum(example_multiset(b).values()) == 512
