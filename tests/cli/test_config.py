"""`tfperf config`: every run-file key with its type, default and meaning, generated from
the run file's pydantic models (so the list cannot drift from what validation accepts);
`--show RUNFILE [--set k=v]` prints the resolved run file; `--json` for scripts."""

from __future__ import annotations

import json

import yaml
from pydantic import BaseModel

from tfperf.config import RunConfig, load_config


def leaf_keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue  # not a run-file key (e.g. the file's own path)
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            keys += leaf_keys(kind, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def test_json_lists_every_key_with_type_default_and_meaning(cli):
    res = cli("config", "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["key"] for r in rows] == leaf_keys()
    for r in rows:
        assert r["type"] and r["description"], r
    by_key = {r["key"]: r for r in rows}
    assert by_key["pipeline.batch_size"]["type"] == "int"
    assert by_key["pipeline.batch_size"]["default"] == 512
    assert "per replica" in by_key["pipeline.batch_size"]["description"]
    assert by_key["pipeline.prefetch"]["type"] == "int | auto"
    assert by_key["train.precision"]["type"] == "auto | float32 | mixed_float16 | mixed_bfloat16"
    assert by_key["train.max_steps"]["default"] is None
    assert by_key["train.checkpoint.every_steps"]["default"] == 500
    assert "distance_maps" in by_key["workload"]["description"]


def test_table_for_people_names_every_key(cli):
    res = cli("config")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    for key in leaf_keys():
        assert any(line.split()[:1] == [key] for line in lines), key
    row = next(line for line in lines if line.startswith("pipeline.batch_size "))
    assert "int" in row and "512" in row and "per replica" in row
    # A section or key prefix narrows the list.
    res = cli("config", "eval")
    assert res.exit_code == 0, res.output
    keys = [line.split()[0] for line in res.stdout.splitlines() if line.startswith("eval.")]
    assert keys == [k for k in leaf_keys() if k.startswith("eval.")]


def test_show_prints_the_resolved_run_file(cli, tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("data:\n  dir: shards\npipeline:\n  batch_size: 64\n")
    res = cli("config", "--show", run, "--set", "train.max_steps=7")
    assert res.exit_code == 0, res.output
    shown = yaml.safe_load(res.stdout)
    cfg = load_config(run, ["train.max_steps=7"])
    assert shown == cfg.model_dump(mode="json", exclude={"source"})
    assert shown["pipeline"]["batch_size"] == 64 and shown["train"]["max_steps"] == 7
    assert shown["pipeline"]["prefetch"] == "auto"  # defaults spelled out
    res = cli("config", "--show", run, "--set", "train.max_steps=7", "--json")
    assert json.loads(res.stdout) == shown


def test_show_names_a_bad_value_and_unknown_prefix(cli, tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("pipeline:\n  batch_sise: 64\n")
    res = cli("config", "--show", run)
    assert res.exit_code == 2
    assert "pipeline.batch_sise: unknown key" in res.stderr and "tfperf config" in res.stderr
    res = cli("config", "pipline")
    assert res.exit_code == 2 and "pipline" in res.stderr and "pipeline" in res.stderr


def test_a_huge_prefix_or_label_is_quoted_cut(cli):
    res = cli("config", "p" * 100_000)
    assert res.exit_code == 2 and len(res.stderr) < 1500, len(res.stderr)
    assert "(99,800 characters cut)" in " ".join(res.stderr.split())
