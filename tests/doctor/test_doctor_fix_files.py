"""What `tfperf doctor --fix` writes: for a `data.pipeline: module:function` run file the
module RUNFILE.optimized.py (the user's function + the kept rewrites) and the run file
pointing at it, which `tfperf train` trains on (in the same train.out_dir as the original run
file's training: it carries on from that checkpoint); nothing when nothing was kept. `tfperf`
runs in this process (the `cli` fixture). The files on their own: fix/test_pipeline_file.py
(the module, the code edits) and fix/test_runfile.py (the run file, comments kept)."""

from __future__ import annotations

import yaml

# Short measurements: the user's slow map loses to its fix by far more than the noise.
FAST = "{steps: 4, warmup: 2, repeats: 2, min_seconds: 0.1, what_ifs: []}"

USER_PIPELINE = '''"""A user's pipeline, written the slow way."""
import numpy as np
import tensorflow as tf


def make(batch_size=32):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 16)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")

    def slow(features, label):
        for _ in range(12):
            features = tf.tanh(features * 1.01 + tf.reduce_mean(features))
        return features, label

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.map(slow)
    return ds.batch(batch_size)


def model():
    import keras

    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(1)])
'''

RUN_FILE = f"""# my experiment: read this before changing anything
data:
  pipeline: user_pipe_files:make   # our own tf.data code
model:
  name: user_pipe_files:model
  loss: mse  # regression on the sign
pipeline:
  batch_size: 32
train:
  out_dir: out  # checkpoints go here
doctor: {FAST}
"""


def test_fix_writes_a_pipeline_module_that_tfperf_train_runs(tmp_path, cli, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "user_pipe_files.py").write_text(USER_PIPELINE)
    (proj / "run.yaml").write_text(RUN_FILE)
    # run from elsewhere: the module is found from the run file's folder, as the run file's
    monkeypatch.chdir(tmp_path)
    # trained before the fix: its checkpoint holds the old pipeline's input position
    res = cli("train", "proj/run.yaml", "--set", "train.max_steps=2", "--no-progress")
    assert res.exit_code == 0, res.output[-3000:]
    res = cli("doctor", "proj/run.yaml", "--fix")
    assert res.exit_code == 0, res.output[-3000:]
    module, fixed = proj / "run.optimized.py", proj / "run.optimized.yaml"
    assert module.exists() and fixed.exists(), res.stdout
    assert not (proj / "run.optimized.md").exists()
    # the before/after table and what was written
    assert "training: final check: original" in res.stdout and "wrote" in res.stdout
    # the run file is the original with only data.pipeline changed, comments kept
    text = fixed.read_text()
    assert text.startswith("# written by `tfperf doctor --fix`")
    for comment in ("# my experiment", "# our own tf.data code", "# checkpoints go here"):
        assert comment in text
    before, after = yaml.safe_load(RUN_FILE), yaml.safe_load(text)
    assert after["data"].pop("pipeline") == "run.optimized.py:make_dataset"
    before["data"].pop("pipeline")
    assert after == before
    # the module names the user's function and the kept rewrites; the report gives each as
    # an edit of the user's file at a line of their function
    code = module.read_text()
    assert "'user_pipe_files:make'" in code and "KEPT = [" in code
    assert "tfperf.apply_rewrites(ds, KEPT)" in code
    assert f"{proj / 'user_pipe_files.py'}:" in res.stdout
    # and tfperf trains on it, in the same train.out_dir: the model, optimizer and step
    # carry on, the new pipeline starts from its beginning (no 'damaged' checkpoint)
    res = cli("train", "proj/run.optimized.yaml", "--set", "train.max_steps=3", "--no-progress")
    assert res.exit_code == 0, res.output[-3000:]
    assert (proj / "out").is_dir() and "damaged" not in res.output
    assert "resumed the model, optimizer and step 2 from " in res.output
    assert "belongs to another pipeline" in res.output


def test_fix_writes_nothing_when_nothing_is_kept(tmp_path, cli):
    run_file = tmp_path / "run.yaml"
    # already tuned (parallel batch, cache, prefetch): no rewrite applies, so none is timed
    # and none can be kept by the noise of a busy machine
    run_file.write_text(
        "data:\n  pipeline: helpers.slow_pipelines:tuned_clean\n"
        "model:\n  name: helpers.slow_pipelines:wide_tiny_model\n  loss: mse\n"
        f"pipeline:\n  batch_size: 64\ndoctor: {FAST}\n"
    )
    res = cli("doctor", run_file, "--fix")
    assert res.exit_code == 0, res.output[-3000:]
    assert "no change was kept: nothing written" in res.stdout
    # no optimized run file: only the run folder (train.out_dir) with the doctor's result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.yaml", "runs"]
    assert [p.name for p in (tmp_path / "runs" / "default").iterdir()] == ["doctor.json"]
