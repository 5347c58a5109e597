"""`tfperf bench` on tiny shards, through its command line in this process (the real
process's stdout: tests/cli/test_stdout_reports.py): the documented JSON fields and sane
values, the table, --compare original, and clear errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
import tensorflow as tf

from tfperf.bench import stage_prefixes, timed_dataset
from tfperf.config import config_from_dict
from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
from tfperf.data.schema import Feature, Schema
from tfperf.workloads import get_workload

from helpers import trainkit

BATCH = 32
MEASUREMENT_KEYS = set(
    "name variant stage examples_per_s batches_per_s mb_per_s cpu_us_per_example "
    "record_bytes runs".split()
)


def write_data(root: Path, schema: Schema, rows, shards: int, workload: str | None) -> Path:
    """Shards plus manifest.json, as `tfperf convert` lays them out."""
    root.mkdir(parents=True, exist_ok=True)
    rows = list(rows)
    per = len(rows) // shards
    infos = []
    for s in range(shards):
        name = f"train.tfrecord-{s:05d}-of-{shards:05d}"
        with tf.io.TFRecordWriter(str(root / name)) as w:
            for row in rows[s * per : (s + 1) * per]:
                w.write(schema.encode(row))
        size = (root / name).stat().st_size
        infos.append(ShardInfo(file=name, records=per, bytes=size, sha256="0" * 64))
    split = SplitInfo(shards=infos, records=per * shards)
    save_manifest(
        Manifest(name="t", schema=schema, splits={"train": split}, workload=workload), root
    )
    return root


@pytest.fixture
def chess_run(tmp_path) -> Path:
    wl = get_workload("chess")
    write_data(tmp_path / "data", wl.schema(), wl.generate(400, seed=1), 2, "chess")
    run = tmp_path / "chess.yaml"
    run.write_text(
        f"workload: chess\ndata:\n  dir: data\npipeline:\n  batch_size: {BATCH}\n"
        "  shuffle_buffer: 100\n"
    )
    return run


@pytest.fixture
def plain_run(tmp_path) -> Path:
    schema = Schema.of(
        Feature(name="x", dtype="float32", shape=(4,)), Feature(name="y", dtype="int64")
    )
    rows = ({"x": [i, i, i, i], "y": i % 2} for i in range(300))
    write_data(tmp_path / "plain", schema, rows, 3, None)
    run = tmp_path / "plain.yaml"
    run.write_text(f"data:\n  dir: plain\n  label: y\npipeline:\n  batch_size: {BATCH}\n")
    return run


def tfperf(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`tfperf ARGS...` in this process, 120 columns wide."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "120")
        proc = trainkit.tfperf_here(*args, check=False)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def check_measurement(m: dict, *, batches: int, repeats: int) -> None:
    assert set(m) == MEASUREMENT_KEYS
    for key in ("examples_per_s", "batches_per_s", "cpu_us_per_example"):
        s = m[key]
        assert 0 < s["min"] <= s["median"] <= s["max"]
    assert len(m["runs"]) == repeats
    for run in m["runs"]:
        assert run["batches"] == batches
        assert run["examples"] == batches * BATCH  # full batches: training drops remainders
        assert run["seconds"] > 0 and run["cpu_seconds"] > 0
    ex, bt = m["examples_per_s"]["median"], m["batches_per_s"]["median"]
    assert ex == pytest.approx(bt * BATCH)
    if m["mb_per_s"] is not None:
        assert m["mb_per_s"]["median"] == pytest.approx(ex * m["record_bytes"] / 1e6)


def test_bench_json_with_stages_and_compare(chess_run):
    opts = "--json --batches 3 --warmup 1 --repeats 2 --compare original"
    out = tfperf("bench", str(chess_run), *opts.split())
    rep = json.loads(out.stdout)
    assert rep["format"] == "tfperf.bench/1"
    assert rep["workload"] == "chess" and rep["split"] == "train"
    assert rep["run_file"] == str(chess_run.resolve())
    assert (rep["batch_size"], rep["batches"], rep["warmup"], rep["repeats"]) == (BATCH, 3, 1, 2)
    assert rep["cpus"] >= 1 and rep["tf_version"] == tf.__version__
    # Stages in pipeline order; the last prefix is the full tuned pipeline.
    stages = ["read", "shuffle", "batch", "parse", "preprocess", "prefetch"]
    assert [m["stage"] for m in rep["stages"]] == stages
    names = ["read", "+shuffle", "+batch", "+parse", "+preprocess", "tuned"]
    assert [m["name"] for m in rep["stages"]] == names
    assert rep["stages"][-1] == rep["tuned"]
    for m in [*rep["stages"], rep["original"]]:
        check_measurement(m, batches=3, repeats=2)
    # 194 packed bytes plus the score and the Example/TFRecord framing.
    assert 200 < rep["tuned"]["record_bytes"] < 260
    assert rep["original"]["variant"] == "original" and rep["original"]["stage"] is None
    med = {m["name"]: m["examples_per_s"]["median"] for m in [*rep["stages"], rep["original"]]}
    ratios = rep["ratios"]
    assert ratios["tuned_over_original"] == pytest.approx(med["tuned"] / med["original"])
    assert ratios["tuned_over_read"] == pytest.approx(med["tuned"] / med["read"])


def test_bench_without_stages_or_workload(plain_run):
    opts = "--json --no-stages --batches 4 --warmup 0 --repeats 1"
    out = tfperf("bench", str(plain_run), *opts.split())
    rep = json.loads(out.stdout)
    assert rep["workload"] is None and rep["original"] is None and rep["stages"] == []
    assert rep["ratios"] == {"tuned_over_original": None, "tuned_over_read": None}
    check_measurement(rep["tuned"], batches=4, repeats=1)
    assert rep["tuned"]["stage"] is None


def test_bench_table_for_people(chess_run):
    opts = "--batches 2 --warmup 1 --repeats 1 --compare original --set pipeline.batch_size=16"
    out = tfperf("bench", str(chess_run), *opts.split())
    text = out.stdout
    for label in ("read", "+shuffle", "+parse", "+preprocess", "+prefetch = tuned", "original"):
        assert label in text
    assert "examples/s" in text and "MB/s" in text and "CPU us/ex" in text
    assert "batch 16" in text  # --set reached the pipeline
    assert "tuned / original = " in text and "of the rate of the reader alone" in text
    assert "bound" not in text  # the reader alone is no bound: the full pipeline may beat it


def test_record_prefixes_repeat_before_their_batch(chess_run):
    # "+shuffle" was repeated after bench's batch: each epoch ended with the shuffle buffer
    # drained without reading, and a buffer larger than the split, filled in the warm-up,
    # made "+shuffle" 875% of reading alone. Repeated first, as training repeats, the
    # buffer stays full and every record yielded is one read.
    from tfperf.config import load_config

    cfg = load_config(str(chess_run), ["pipeline.shuffle_buffer=1000"])  # > the 400 records
    for stage in ("read", "shuffle"):
        ds = timed_dataset(cfg, "tuned", stage, "train")
        assert int(tf.data.experimental.cardinality(ds)) == tf.data.INFINITE_CARDINALITY
        assert ds.element_spec.shape == (BATCH,)  # pulled in batches, as training pulls
    first_epochs = next(iter(timed_dataset(cfg, "tuned", "shuffle", "train").batch(25)))
    assert first_epochs.shape == (25, BATCH)  # 800 records: past the end of the first epoch


def test_bench_errors_name_the_option_or_file(plain_run, tmp_path):
    bad = tfperf("bench", str(plain_run), "--compare", "original", check=False)
    assert bad.returncode == 2
    assert "--compare original: needs a built-in workload" in bad.stderr
    assert "Traceback" not in bad.stderr
    # A corrupt shard: the error names the file instead of TensorFlow's bare byte offset.
    shard = tmp_path / "plain" / "train.tfrecord-00001-of-00003"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    opts = "--batches 20 --warmup 0 --repeats 1 --no-stages --set pipeline.shuffle_buffer=0"
    bad = tfperf("bench", str(plain_run), *opts.split(), check=False)
    assert bad.returncode == 2, bad.stderr
    flat = "".join(bad.stderr.split())  # rich wraps long lines, even inside a path
    assert str(shard) in flat and "corruptTFRecorddata" in flat


@pytest.mark.parametrize(
    ("pipeline", "workload", "expected"),
    [
        ({}, None, "read shuffle batch parse preprocess prefetch"),
        (
            {"cache_records": True, "cache_preprocessed": True},
            None,
            "read cache_records shuffle batch parse preprocess cache prefetch",
        ),
        ({"parse": "per_example"}, None, "read shuffle parse preprocess prefetch"),
    ],
)
def test_stage_prefixes(pipeline, workload, expected):
    cfg = config_from_dict({"pipeline": pipeline, "workload": workload})
    per_example = cfg.pipeline.parse == "per_example"
    assert stage_prefixes(cfg, per_example) == expected.split()


def test_run_all_replaces_only_its_own_section():
    spec = importlib.util.spec_from_file_location(
        "run_all", Path(__file__).resolve().parents[1] / "benchmarks" / "run_all.py"
    )
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    text = (
        "# Benchmarks\nintro\n\n<!-- begin bench_a -->\nold a\n<!-- end bench_a -->\n"
        "notes on a, kept\n<!-- begin bench_b -->\nold b\n<!-- end bench_b -->\n"
    )
    new = run_all.replace_section(text, "bench_a", "## A\nnew a\n")
    assert "old a" not in new and "## A\nnew a\n<!-- end bench_a -->" in new
    assert "notes on a, kept" in new and "old b" in new and new.startswith("# Benchmarks\nintro")
    # A body with regex escapes stays literal; a new script's section is appended.
    added = run_all.replace_section(new, "bench_c", r"path \1 C:\new")
    assert added.endswith("<!-- begin bench_c -->\npath \\1 C:\\new\n<!-- end bench_c -->\n")
    assert run_all.replace_section(added, "bench_c", "again").count("bench_c -->") == 2


def test_bench_generates_missing_workload_data_with_a_message(tmp_path):
    run = tmp_path / "gen.yaml"
    run.write_text(
        "workload: chess\ndata:\n  dir: gen\n  examples: 700\n  eval_examples: 64\n"
        f"pipeline:\n  batch_size: {BATCH}\n"
    )
    opts = "--json --no-stages --batches 2 --warmup 0 --repeats 1"
    out = tfperf("bench", str(run), *opts.split())
    assert "generating 700 chess examples first" in " ".join(out.stderr.split())
    assert (tmp_path / "gen" / "manifest.json").exists()
    rep = json.loads(out.stdout)
    check_measurement(rep["tuned"], batches=2, repeats=1)


def test_bench_pipeline_on_a_users_own_pipeline(tmp_path):
    (tmp_path / "mypipe.py").write_text(
        "import tensorflow as tf\n"
        "def make(batch_size, training):\n"
        "    x = tf.data.Dataset.range(1000).map(lambda i: tf.cast(i, tf.float32))\n"
        "    return x.batch(batch_size, drop_remainder=True).map(lambda b: (b, b))\n"
    )
    run = tmp_path / "own.yaml"
    run.write_text(f"data:\n  pipeline: mypipe:make\npipeline:\n  batch_size: {BATCH}\n")
    from tfperf.bench import bench_pipeline
    from tfperf.config import load_config
    from tfperf.errors import UserError

    rep = bench_pipeline(load_config(run), repeats=1, batches=3, warmup=1)
    d = json.loads(rep.to_json())
    assert d["stages"] == [] and d["tuned"]["mb_per_s"] is None  # no manifest: no MB/s
    check_measurement(d["tuned"], batches=3, repeats=1)
    with pytest.raises(UserError, match="--compare original: data.pipeline is a user pipeline"):
        bench_pipeline(load_config(run), compare="original")
    with pytest.raises(UserError, match="--batches: expected an integer >= 1, found 0"):
        bench_pipeline(load_config(run), batches=0)
