"""What `tfperf doctor --fix` writes for a `data.pipeline: module:function` run file
(doctor/fix/pipeline_file.py): the module calling the user's function and applying the kept
rewrites (found from wherever it is written), the run file pointing at it, and each kept
rewrite as an edit of the user's own code on the line it concerns (the line quoted)."""

from __future__ import annotations

from types import SimpleNamespace

import tfperf
from tfperf.config import load_config
from tfperf.doctor.fix.pipeline_file import code_edits, optimized_paths, write_optimized_pipeline
from tfperf.doctor.graph import lint
from tfperf.doctor.rewrites.cache import cache_work
from tfperf.doctor.rules import ram
from tfperf.inputs.datasets import make_input_dataset
from tfperf.util.imports import load_object

CAP_SHUFFLE = ram.CAP_SHUFFLE.label  # the name --fix prints


def test_pipeline_module_written_elsewhere_finds_the_users_function(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "far_pipe.py").write_text("def make(batch_size=3):\n    return ['data', batch_size]\n")
    (proj / "run.yaml").write_text("data:\n  pipeline: far_pipe:make  # mine\n")
    cfg = load_config(proj / "run.yaml")
    result = SimpleNamespace(
        pipeline_changes=["prefetch at the end"],
        run_file_changes={},
        code_edits=["an edit"],
        trials=[],
    )
    out = tmp_path / "elsewhere" / "run.optimized.yaml"
    header = "# written by `tfperf doctor --fix`: training 1 -> 2 examples/s (2.00x)\n"
    written = write_optimized_pipeline(cfg, result, out, header)
    assert written == [str(out.with_suffix(".py")), str(out)]
    fixed = load_config(out)
    assert fixed.data.pipeline == "run.optimized.py:make_dataset"
    assert "# mine" in out.read_text()
    # loaded as the run file names it; only the arguments the user's function declares
    # are passed, and evaluation reads the user's pipeline as it is
    make = load_object(fixed.data.pipeline, field="data.pipeline", search_dir=str(out.parent))
    assert make(training=False, batch_size=5, split="eval", config=fixed) == ["data", 5]
    assert "an edit" in out.with_suffix(".py").read_text()


USER_PIPELINE = """import tensorflow as tf


def make_dataset(files, batch_size=64):
    ds = tf.data.TFRecordDataset(files)
    ds = ds.shuffle(200_000_000)
    ds = ds.map(tf.strings.length)
    ds = ds.batch(batch_size)
    return ds
"""


def test_each_kept_graph_edit_is_a_code_edit_on_its_line(tmp_path):
    (tmp_path / "user_pipe.py").write_text(USER_PIPELINE)
    cfg = tfperf.config_from_dict({"data": {"pipeline": f"{tmp_path}/user_pipe.py:make_dataset"}})
    names = ["parallel interleave of file reads", CAP_SHUFFLE, "parallel batch"]
    edits = code_edits(cfg, names)
    where = str(tmp_path / "user_pipe.py")
    assert edits[0].startswith(f"{names[0]}: {where}:5: read several files at once")
    assert edits[1].startswith(f"{CAP_SHUFFLE}: {where}:6: pass .shuffle() a buffer_size")
    assert edits[2].startswith(f"parallel batch: {where}:8: pass num_parallel_calls")


LIST_FILES_PIPELINE = """import tensorflow as tf


def make_dataset(batch_size=32):
    files = tf.data.Dataset.list_files("photos/*.png")
    return files.map(tf.io.read_file).batch(batch_size)
"""


def test_the_cache_edit_points_at_the_shuffled_source(tmp_path):
    (tmp_path / "photos_pipe.py").write_text(LIST_FILES_PIPELINE)
    cfg = tfperf.config_from_dict({"data": {"pipeline": f"{tmp_path}/photos_pipe.py:make_dataset"}})
    (edit,) = code_edits(cfg, ["cache the deterministic prefix"])
    assert edit.startswith(
        f"cache the deterministic prefix: {tmp_path / 'photos_pipe.py'}:5: add .cache()"
    )
    assert "list_files(..., shuffle=False)" in edit and "deterministic = False" not in edit


FILTERED_PIPELINE = """import tensorflow as tf


def make_dataset(files, batch_size=32):
    ds = tf.data.TFRecordDataset(files)
    ds = ds.map(tf.strings.length)
    ds = ds.filter(lambda n: n > 3)
    ds = ds.map(lambda n: n * 2)
    return ds.batch(batch_size)
"""


def test_the_batch_move_edit_points_at_the_map_right_before_the_batch(tmp_path):
    (tmp_path / "filtered_pipe.py").write_text(FILTERED_PIPELINE)
    cfg = tfperf.config_from_dict(
        {"data": {"pipeline": f"{tmp_path}/filtered_pipe.py:make_dataset"}}
    )
    (moved,) = code_edits(cfg, ["batch before per-example map"])
    where = tmp_path / "filtered_pipe.py"
    # the map after the filter moves (line 8), not the one the filter holds (line 6)
    assert moved.startswith(f"batch before per-example map: {where}:8: move this map"), moved


KERAS_PIPELINE = """import keras


def make_dataset(batch_size=32):
    return keras.utils.image_dataset_from_directory("photos", batch_size=batch_size)
"""


def test_the_cache_edit_of_a_keras_loader_caches_its_output(tmp_path):
    (tmp_path / "keras_pipe.py").write_text(KERAS_PIPELINE)
    cfg = tfperf.config_from_dict({"data": {"pipeline": f"{tmp_path}/keras_pipe.py:make_dataset"}})
    (edit,) = code_edits(cfg, ["cache the deterministic prefix"])
    assert edit.startswith(f"cache the deterministic prefix: {tmp_path / 'keras_pipe.py'}:5:")
    assert "image_dataset_from_directory(..., shuffle=False)" in edit and "list_files" not in edit


def test_without_the_functions_source_each_edit_is_said_in_general():
    cfg = tfperf.config_from_dict({})  # tfperf's own pipeline: no function to point into
    assert code_edits(cfg, []) == []
    assert code_edits(cfg, ["prefetch at the end", "no such rewrite"]) == [
        "prefetch at the end: end the pipeline with .prefetch(tf.data.AUTOTUNE)",
        "no such rewrite: apply it where the pipeline is built",
    ]


def test_only_run_file_changes_write_only_the_run_file(tmp_path):
    (tmp_path / "run.yaml").write_text("data:\n  pipeline: some_pipe:make\n")
    cfg = load_config(tmp_path / "run.yaml")
    out = tmp_path / "run.optimized.yaml"
    assert optimized_paths(out) == (out, tmp_path / "run.optimized.py")
    header = "# written by `tfperf doctor --fix`: training 1 -> 2 examples/s (2.00x)\n"
    train_only = SimpleNamespace(
        pipeline_changes=[], run_file_changes={"train.jit_compile": True}, code_edits=[], trials=[]
    )
    assert write_optimized_pipeline(cfg, train_only, out, header) == [str(out)]
    assert load_config(out).data.pipeline == "some_pipe:make"
    assert not (tmp_path / "run.optimized.py").exists()
    nothing = SimpleNamespace(pipeline_changes=[], run_file_changes={}, code_edits=[])
    assert write_optimized_pipeline(cfg, nothing, tmp_path / "other.yaml", header) == []


AUGMENTED_PIPELINE = """import tensorflow as tf


def decode(x):
    return tf.cast(x, tf.float32) * 2.0


def augment(x):
    return x + tf.random.uniform([], 0.0, 0.5)


def make_dataset(batch_size=8):
    ds = tf.data.Dataset.range(64)
    ds = ds.map(decode)
    ds = ds.map(augment)
    ds = ds.shuffle(16)
    return ds.batch(batch_size)
"""


def test_the_cache_edit_points_at_the_map_the_cache_follows(tmp_path):
    # The cache goes after the decode, before the random augment: the edit names the
    # decode's line (14), not the shuffle's (16), where a cache would freeze the augment.
    (tmp_path / "aug_pipe.py").write_text(AUGMENTED_PIPELINE)
    cfg = tfperf.config_from_dict({"data": {"pipeline": f"{tmp_path}/aug_pipe.py:make_dataset"}})
    ds = make_input_dataset(cfg, training=True)
    fixed = cache_work(lint.read_graph(ds), ds, budget=2**20)
    assert fixed is not None
    (edit,) = code_edits(cfg, ["cache the deterministic prefix"], fixed)
    where = tmp_path / "aug_pipe.py"
    assert edit.startswith(f"cache the deterministic prefix: {where}:14: add .cache()"), edit
    assert "(the line: `ds = ds.map(decode)`)" in edit
    # Without the fixed pipeline the edit falls back to the line before the shuffle.
    (general,) = code_edits(cfg, ["cache the deterministic prefix"])
    assert f"{where}:16:" in general
