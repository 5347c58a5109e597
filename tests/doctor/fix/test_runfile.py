"""Run-file changes for `tfperf doctor --fix` (doctor/fix/runfile.py): which keys are worth
trying for a diagnosis (those that change the results only when doctor.allow says so, none
already in effect), model.compile's keywords for a model.fit user, and the optimized run file
written where it goes: the original's text with only the changed keys set (comments and
order kept), its relative paths rewritten to name the same files from there."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import tensorflow as tf
import yaml

from tfperf.config import config_from_dict, dump_config, load_config
from tfperf.doctor.fix.runfile import (
    apply_changes,
    compile_kwargs,
    default_output,
    describe_changes,
    edit_yaml,
    relocate_paths,
    run_file_candidates,
    withheld,
    write_run_file,
)
from tfperf.doctor.rewrites.edits import example_multiset
from tfperf.doctor.rules import run_rules
from tfperf.inputs.datasets import make_input_dataset


def _dataset() -> tf.data.Dataset:
    return tf.data.Dataset.range(64).map(lambda x: tf.cast(x, tf.float32)).batch(8).prefetch(2)


def test_results_changing_findings_are_tried_only_when_allowed(evidence):
    rates = {"pipeline": 9000.0, "compute": 1000.0, "training": 990.0}
    ctx = evidence(
        _dataset(),
        **rates,
        variants={"precision=mixed_bfloat16": 2000.0, "compute at batch=32": 2000.0},
    )
    findings = run_rules(ctx)
    assert {"precision", "small_batch"} <= {f.code for f in findings}
    diag = SimpleNamespace(findings=findings, batch_size=8, variants=ctx.variants)
    cfg = config_from_dict({"workload": "regression"})
    names = [n for n, _ in run_file_candidates(cfg, diag)]
    assert "precision mixed_bfloat16" not in names and "larger batch" not in names
    lines = withheld(cfg, diag)
    assert any("--allow precision" in ln for ln in lines) and any(
        "--allow batch" in ln for ln in lines
    )
    cfg = config_from_dict({"workload": "regression", "doctor": {"allow": ["precision", "batch"]}})
    cands = dict(run_file_candidates(cfg, diag))
    assert "precision mixed_bfloat16" in cands and "larger batch" in cands
    assert cands["larger batch"] == {"pipeline.batch_size": 32}  # the batch timed fastest
    assert withheld(cfg, diag) == []


def test_compile_kwargs_name_what_keeps_the_results():
    codes = [SimpleNamespace(code=c, expected_speedup=1.3) for c in ("xla", "steps_per_call")]
    codes.append(SimpleNamespace(code="precision", expected_speedup=1.5))
    assert compile_kwargs(SimpleNamespace(findings=codes), 30) == {
        "jit_compile": True,
        "steps_per_execution": 30,
    }
    assert compile_kwargs(SimpleNamespace(findings=[]), 30) == {}
    # An input-bound run: steps per call helps the model alone, training ~1.0x: not advised
    # under optimize's "nothing helped".
    codes[1].expected_speedup = 1.0
    assert compile_kwargs(SimpleNamespace(findings=codes), 30) == {"jit_compile": True}


def test_no_trial_of_a_change_already_in_effect():
    """pipeline.deterministic: null is already false in training: no trial of 'false'."""
    diag = SimpleNamespace(findings=[], batch_size=8, variants={})
    cfg = config_from_dict({"workload": "regression"})
    assert "pipeline.deterministic" not in str(run_file_candidates(cfg, diag))
    cfg = config_from_dict({"workload": "regression", "pipeline": {"deterministic": True}})
    assert ("non-deterministic order", {"pipeline.deterministic": False}) in run_file_candidates(
        cfg, diag
    )


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


def test_fix_writes_a_run_file_that_works_in_another_folder(tmp_path, tfperf_data):
    tfperf_data(tmp_path / "proj" / "data")
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


def test_optimized_run_file_keeps_comments_and_changes_only_the_kept_keys(tmp_path):
    original = (
        "# tuned by hand, mostly\n"
        "data:\n"
        "  dir: data   # converted shards\n"
        "  label: y\n"
        "pipeline:\n"
        "  batch_size: 32  # fits the GPU\n"
        "  parse: per_example\n"
        "  prefetch: 1\n"
        "doctor: {steps: 4}\n"
    )
    run_file = tmp_path / "run.yaml"
    run_file.write_text(original)
    cfg = load_config(run_file)
    out = tmp_path / "run.optimized.yaml"
    changes = {"pipeline.parse": "batched", "pipeline.prefetch": "auto", "train.precision": "f"}
    write_run_file(cfg, changes, out, "# header\n")
    text = out.read_text()
    assert text.startswith("# header\n# tuned by hand, mostly\n")
    for line in ("  dir: data   # converted shards", "  batch_size: 32  # fits the GPU"):
        assert line in text.splitlines()
    assert "doctor: {steps: 4}" in text  # a flow mapping stays one
    data = yaml.safe_load(text)
    assert data["pipeline"] == {"batch_size": 32, "parse": "batched", "prefetch": "auto"}
    assert data["train"] == {"precision": "f"}  # a section the file lacked is added
    assert data["data"] == {"dir": "data", "label": "y"}


def test_the_optimized_run_file_goes_beside_the_original():
    cfg = config_from_dict({})
    assert default_output("exp/run.yaml", cfg) == Path("exp/run.optimized.yaml")
    assert default_output(None, cfg) == Path("doctor.optimized.yaml")


def test_changes_are_applied_as_a_validated_run_file():
    cfg = config_from_dict({"pipeline": {"batch_size": 32, "prefetch": 1}})
    cfg.source = "/somewhere/run.yaml"
    changes = {"pipeline.prefetch": "auto", "pipeline.threads": 1, "train.jit_compile": True}
    new = apply_changes(cfg, changes)
    assert new.pipeline.prefetch == "auto" and new.pipeline.threads == 1
    assert new.train.jit_compile is True and new.pipeline.batch_size == 32
    assert new.source == cfg.source and cfg.pipeline.prefetch == 1  # a copy
    assert describe_changes(changes) == (
        "pipeline.prefetch: auto, pipeline.threads: 1, train.jit_compile: True"
    )


def test_editing_the_yaml_adds_missing_sections_and_keeps_the_rest():
    text = "# mine\npipeline:\n  batch_size: 32  # fits\n  parse: 'per_example'\n"
    out = edit_yaml(text, {"pipeline.prefetch": "auto", "train.strategy": "mirrored"})
    assert out.startswith("# mine\n") and "batch_size: 32  # fits" in out
    assert "parse: 'per_example'" in out  # its quotes too
    assert yaml.safe_load(out) == {
        "pipeline": {"batch_size": 32, "parse": "per_example", "prefetch": "auto"},
        "train": {"strategy": "mirrored"},
    }
    assert yaml.safe_load(edit_yaml("", {"a.b": 1})) == {"a": {"b": 1}}


def test_what_set_changed_for_the_run_is_named_in_the_header(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("pipeline:\n  batch_size: 32\n")
    cfg = load_config(run, ["pipeline.batch_size=64"])
    out = tmp_path / "run.optimized.yaml"
    write_run_file(cfg, {"pipeline.prefetch": "auto"}, out, "# header\n")
    text = out.read_text()
    assert text.startswith("# header\n#   not included: --set pipeline.batch_size=64\n")
    assert yaml.safe_load(text)["pipeline"] == {"batch_size": 32, "prefetch": "auto"}


def test_a_run_file_built_in_memory_is_written_in_full(tmp_path):
    cfg = config_from_dict({"pipeline": {"batch_size": 16}})
    out = tmp_path / "doctor.optimized.yaml"
    write_run_file(cfg, {"pipeline.prefetch": "auto"}, out, "# header\n")
    fixed = load_config(out)
    assert fixed.pipeline.batch_size == 16 and fixed.pipeline.prefetch == "auto"
