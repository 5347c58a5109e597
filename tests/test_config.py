"""config.py: run files load with typed defaults; a bad value is named by its path (e.g.
pipeline.batch_size) with what was expected and found; `--set` overrides nested values typed
as YAML. How errors are worded (unknown keys, the --set item that gave a value):
tests/test_config_errors.py."""

from __future__ import annotations

import pytest

from tfperf.config import (
    ConfigError,
    PipelineConfig,
    RunConfig,
    apply_overrides,
    config_from_dict,
    dump_config,
    load_config,
    parse_override,
)


def write(tmp_path, text: str):
    p = tmp_path / "run.yaml"
    p.write_text(text)
    return p


def test_defaults_and_a_valid_file(tmp_path):
    cfg = load_config(None)
    assert cfg.pipeline.batch_size == 512 and cfg.pipeline.shuffle_buffer == 10_000
    p = write(tmp_path, "data:\n  dir: shards\npipeline:\n  batch_size: 64\n  prefetch: 2\n")
    cfg = load_config(p)
    assert cfg.pipeline.batch_size == 64 and cfg.pipeline.prefetch == 2
    assert cfg.source == str(p.resolve())
    assert cfg.resolve(cfg.data.dir) == str((tmp_path / "shards").resolve())
    assert load_config(write(tmp_path, dump_config(cfg))).pipeline == cfg.pipeline


@pytest.mark.parametrize(
    ("text", "path", "found"),
    [
        ("pipeline:\n  batch_size: -3\n", "pipeline.batch_size", "-3"),
        ("pipeline:\n  batch_size: many\n", "pipeline.batch_size", "'many'"),
        ("pipeline:\n  prefetch: soon\n", "pipeline.prefetch", "'soon'"),
        ("train:\n  precision: float8\n", "train.precision", "'float8'"),
        ("train:\n  checkpoint:\n    keep: 0\n", "train.checkpoint.keep", "0"),
        ("eval:\n  mode: sideways\n", "eval.mode", "'sideways'"),
    ],
)
def test_bad_values_name_their_path(tmp_path, text, path, found):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}: {path}: ") and f"found {found}" in msg
    assert msg.count("\n") == 0  # one line per bad field, not one per union member


def test_unknown_workload_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match=r"workload: .*expected one of .*found 'tennis'"):
        load_config(write(tmp_path, "workload: tennis\n"))
    with pytest.raises(ConfigError, match="not valid YAML") as bad:
        load_config(write(tmp_path, "pipeline: [unclosed\n"))
    assert "<unicode string>" not in str(bad.value) and str(bad.value).count(".yaml") >= 2
    with pytest.raises(ConfigError, match="expected a mapping of sections, found list"):
        load_config(write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="no such run file"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("item", "keys", "value"),
    [
        ("pipeline.batch_size=256", ["pipeline", "batch_size"], 256),
        ("pipeline.cache_records=true", ["pipeline", "cache_records"], True),
        ("model.learning_rate=0.003", ["model", "learning_rate"], 0.003),
        ("model.metrics=[mae, mse]", ["model", "metrics"], ["mae", "mse"]),
        ("train.max_steps=null", ["train", "max_steps"], None),
        ("data.dir=some/path", ["data", "dir"], "some/path"),
        ("train.out_dir=", ["train", "out_dir"], ""),
    ],
)
def test_parse_override_types_values_as_yaml(item, keys, value):
    assert parse_override(item) == (keys, value)


def test_overrides_apply_nested_and_are_validated(tmp_path):
    p = write(tmp_path, "pipeline:\n  batch_size: 64\n")
    overrides = ["pipeline.batch_size=128", "train.checkpoint.every_steps=7"]
    cfg = load_config(p, [*overrides, "pipeline.interleave_cycle=auto", "model.metrics=[mae]"])
    assert cfg.pipeline.batch_size == 128
    assert cfg.train.checkpoint.every_steps == 7
    assert cfg.pipeline.interleave_cycle == "auto" and cfg.model.metrics == ["mae"]
    # YAML 1.1 reads 3e-4 as text; the float field still gets the number
    assert load_config(p, ["model.learning_rate=3e-4"]).model.learning_rate == 3e-4
    with pytest.raises(ConfigError, match=r"pipeline\.batch_size: .*found 'big'"):
        load_config(p, ["pipeline.batch_size=big"])
    with pytest.raises(ConfigError, match=r"pipeline\.no_such: unknown key"):
        load_config(p, ["pipeline.no_such=1"])
    with pytest.raises(ConfigError, match="expected key.path=value"):
        load_config(p, ["pipeline.batch_size"])
    with pytest.raises(ConfigError, match="'batch_size' is a value, not a section"):
        load_config(p, ["pipeline.batch_size.x=1"])


def test_apply_overrides_does_not_touch_the_input():
    data = {"pipeline": {"batch_size": 1}}
    out = apply_overrides(data, ["pipeline.batch_size=2", "eval.steps=3"])
    assert data == {"pipeline": {"batch_size": 1}}
    assert out == {"pipeline": {"batch_size": 2}, "eval": {"steps": 3}}


def test_sections_forbid_unknown_keys_on_assignment_too():
    cfg = config_from_dict({})
    assert isinstance(cfg, RunConfig)
    with pytest.raises(ValueError):
        cfg.pipeline.batch_size = 0
    with pytest.raises(ValueError):
        PipelineConfig(shuffle_ram_mb=-1)


def test_workload_options_reach_the_workload_and_bad_ones_are_named():
    from tfperf.errors import UserError
    from tfperf.inputs.datasets import workload_of

    cfg = config_from_dict({"workload": "deblur", "workload_options": {"patch": 32}})
    assert workload_of(cfg).patch == 32
    bad = config_from_dict({"workload": "deblur", "workload_options": {"patchh": 32}})
    with pytest.raises(UserError, match="workload_options for 'deblur'.*patchh"):
        workload_of(bad)


def test_a_loaded_run_file_knows_where_each_value_came_from(tmp_path):
    p = write(tmp_path, "data:\n  label: y\n")
    cfg = load_config(p, ["data.dir=shards", "train={max_steps: 5}"])
    assert cfg.origin("data.dir") == "--set data.dir=shards"
    assert cfg.origin("train.max_steps") == "--set train={max_steps: 5}"
    assert cfg.origin("data.label") == str(p.resolve())
    assert load_config(None).origin("data.label") == "the defaults"


def test_every_key_has_a_description():
    from pydantic import BaseModel

    def walk(model):
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            assert field.description, f"{model.__name__}.{name} has no description"
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                walk(field.annotation)

    walk(RunConfig)


def test_a_run_file_alias_bomb_is_refused_naming_the_file(tmp_path):
    # anchors 8 levels deep: 56 s and 2.1 GB before "unknown key" when expanded
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{k}: &a{k} [" + ",".join([f"*a{k - 1}"] * 9) + "]" for k in range(1, 9)]
    p = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}: expected at most 100,000 values once its YAML aliases")
    assert "490,329,064 values" in msg and len(msg) < 400
    # a --set value is YAML too: 100 aliases of 100 aliases of 10 values
    item = "train=[&x [1,1,1,1,1,1,1,1,1,1], &y [" + ",".join(["*x"] * 100) + "], "
    item += "[" + ",".join(["*y"] * 100) + "]]"
    with pytest.raises(ConfigError) as err:
        parse_override(item)
    msg = str(err.value)
    assert msg.startswith("--set 'train=[&x [1,1,1,1,1,1,1,1,1,1], &y [*x,*x,") and len(msg) < 600
    assert "characters cut): expected at most 100,000 values" in msg
    assert "found 200 aliases (the first: *x on line 1) that expand it to 111,214 values" in msg


def test_long_input_is_quoted_cut_in_errors(tmp_path):
    huge = "x" * 1_000_000
    p = write(tmp_path, f"pipeline:\n  batch_size: {huge}\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "pipeline.batch_size: " in msg and "... (999,800 characters cut)" in msg
    assert len(msg) < 600
    with pytest.raises(ConfigError) as err:
        config_from_dict({}, ["train.max_steps=" + huge])
    msg = str(err.value)
    assert "--set train.max_steps=xxx" in msg and "(999,816 characters cut)" in msg
    assert len(msg) < 800
    with pytest.raises(ConfigError, match=r"xxx'... \(999,800 characters cut\): expected key"):
        parse_override(huge)


def test_an_empty_out_dir_is_refused_naming_the_key(tmp_path):
    # "" resolved to the run file's folder: checkpoints were written among the user's files
    p = write(tmp_path, "train:\n  out_dir: ''\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}: train.out_dir: ") and "expected a folder" in msg
    assert msg.endswith("found ''")
    with pytest.raises(ConfigError, match=r"^--set train.out_dir=  : train.out_dir: .*folder"):
        config_from_dict({}, ["train.out_dir=  "])
    assert config_from_dict({}, ["train.out_dir=runs/a"]).train.out_dir == "runs/a"
