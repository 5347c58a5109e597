"""Reports go to stdout (so `> file` and `| less` work), progress and logs to stderr; a
report piped or redirected lays its tables out for 100 columns (or COLUMNS), cells wrapped,
while a path printed on its own line stays whole there. `tfperf cluster-server` saying where it
serves on stdout is asserted on the servers of tests/train/test_strategy.py's parameter-server
test (real servers that test starts anyway)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from helpers.clikit import tiny_dataset
from helpers.trainkit import tfperf_here

MODEL = """
import keras

def make_model():
    inputs = {n: keras.Input(shape=(), name=n) for n in ("x1", "x2")}
    x = keras.ops.stack([inputs["x1"], inputs["x2"]], axis=-1)
    return keras.Model(inputs, keras.layers.Dense(1)(x))
"""


def deep_folder(tmp_path):
    """A folder whose path is far longer than 80 columns, with a space in it."""
    folder = tmp_path / ("a folder with a rather long name " * 2).strip() / ("deeper_" * 8)
    folder.mkdir(parents=True)
    return folder


def write_run(folder, **sections) -> str:
    run = folder / "run.yaml"
    data = {"data": {"dir": str(folder / "data"), "label": "y"}, **sections}
    run.write_text(yaml.safe_dump(data))
    return str(run)


def whole_on_a_line(text: str, path: str) -> bool:
    return any(path in line for line in text.splitlines())


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_bench_table_on_stdout_unwrapped(tmp_path, cli):
    # In this process: the captured stdout is not a terminal either, as when piped.
    folder = deep_folder(tmp_path)
    tiny_dataset(folder / "data")
    run = write_run(folder, pipeline={"batch_size": 8, "shuffle_buffer": 16})
    res = cli("bench", run, "--batches", "2", "--repeats", "1", "--warmup", "0")
    assert res.exit_code == 0, res.stderr
    assert whole_on_a_line(res.stdout, run), res.stdout
    assert "examples/s" in res.stdout and "examples/s" not in res.stderr


def test_profile_report_on_stdout_unwrapped(tmp_path, cli):
    folder = deep_folder(tmp_path)
    tiny_dataset(folder / "data")
    (folder / "tiny_model.py").write_text(MODEL)
    run = write_run(
        folder,
        pipeline={"batch_size": 8, "shuffle_buffer": 16},
        model={"name": "tiny_model:make_model", "loss": "mse"},
        train={"out_dir": str(folder / "run"), "precision": "float32"},
    )
    res = cli("profile", run, "--steps", "2:3", "--out", folder / "prof")
    assert res.exit_code == 0, res.stderr
    assert whole_on_a_line(res.stdout, str(folder / "prof" / "timeline.json")), res.stdout
    assert "profiled steps 2-3" in res.stdout and "profiled steps" not in res.stderr


def test_config_table_fits_100_columns_or_columns(cli, monkeypatch):
    # Redirected, the key list was padded to its longest meaning: 1,037 columns.
    monkeypatch.delenv("COLUMNS", raising=False)
    res = cli("config")
    assert res.exit_code == 0, res.stderr
    assert widest(res.stdout) <= 100, widest(res.stdout)
    assert re.search(r"^pipeline\.shuffle_ram_mb\s", res.stdout, re.M)  # keys stay whole
    monkeypatch.setenv("COLUMNS", "130")
    wider = cli("config").stdout
    assert 100 < widest(wider) <= 130
    assert len(wider.splitlines()) < len(res.stdout.splitlines())  # fewer wrapped meanings


def test_config_show_on_stdout_unwrapped(tmp_path, cli):
    folder = deep_folder(tmp_path)
    run = write_run(folder)
    res = cli("config", "--show", run)
    assert res.exit_code == 0, res.stderr
    assert whole_on_a_line(res.stdout, str(folder / "data")), res.stdout


CHATTY_PIPELINE = """
import tensorflow as tf

def make_dataset(batch_size=8):
    print("Found 64 files belonging to 2 classes.")  # as keras.utils.*_dataset_from_* do
    x = tf.random.stateless_uniform([64, 2], seed=[1, 2])
    return tf.data.Dataset.from_tensor_slices(({"x1": x[:, 0], "x2": x[:, 1]}, x[:, 0])).batch(
        batch_size
    )
"""


def test_json_stays_whole_when_the_users_code_prints(tmp_path, cli):
    # In this process: the command sends Python's sys.stdout to stderr while it runs, which
    # the captured streams show as a pipe's would (as the bench table's test above).
    (tmp_path / "chatty.py").write_text(CHATTY_PIPELINE)
    run = write_run(tmp_path, pipeline={"batch_size": 8})
    doc = yaml.safe_load(open(run))
    doc["data"] = {"pipeline": "chatty:make_dataset"}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(doc))
    res = cli("bench", run, "--json", "--batches", "2", "--repeats", "1", "--warmup", "0")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["format"] == "tfperf.bench/1", res.stdout  # nothing else
    assert "Found 64 files belonging to 2 classes." in res.stderr  # the print is kept


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`tfperf train` (in this process) with stdout and stderr apart, one step per call, in a
    folder whose paths are longer than 100 columns: (the checkpoint folder, its output)."""
    folder = deep_folder(tmp_path_factory.mktemp("train"))
    tiny_dataset(folder / "data")
    (folder / "tiny_model.py").write_text(MODEL)
    run = write_run(
        folder,
        pipeline={"batch_size": 8, "shuffle_buffer": 16},
        model={"name": "tiny_model:make_model", "loss": "mse"},
        train={
            "out_dir": str(folder / "run"),
            "precision": "float32",
            "max_steps": 6,
            "steps_per_loop": 1,
            "monitor_system": False,
        },
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "")  # set but empty: the default width
        res = tfperf_here("train", run)
    return folder / "run" / "checkpoints", res


def test_train_summary_on_stdout_laid_out_for_100_columns(trained):
    # It went to stderr: `tfperf train run.yaml > out` left `out` empty.
    checkpoints, res = trained
    assert "training (max_steps)" in res.stdout and "training (" not in res.stderr
    assert "examples/s" in res.stdout and "input wait" in res.stdout
    # The tables fit 100 columns; the paths, longer, each stay whole on a line of their own.
    folder = str(checkpoints.parent)
    assert widest("\n".join(x for x in res.stdout.splitlines() if folder not in x)) <= 100
    assert len(folder) > 100 and whole_on_a_line(res.stdout, str(checkpoints / "ckpt-6"))
    assert "1 step per call" in res.stdout  # was "1 steps per call"


def test_train_progress_rate_is_the_summarys(trained):
    # The bar showed the last call's rate (187,587 ex/s) beside a summary of 92,621: both
    # are now the run's mean over its timed calls.
    _, res = trained
    bar = re.findall(r"([\d,]+) ex/s mean", res.stderr)
    summary = re.search(r"examples/s\s*│\s*([\d,.]+)", res.stdout)
    assert bar and summary, (res.stderr, res.stdout)
    assert bar[-1] == summary.group(1)
