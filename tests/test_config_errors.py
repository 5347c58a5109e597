"""config_errors.py: a run file's validation errors worded for people: one line per field
(not one per union member) naming where the value came from (the file or the `--set` item
that gave it or its section), the key, what was expected and what was found, and for an
unknown key the closest known one."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from tfperf.config import ConfigError, load_config
from tfperf.config_errors import format_errors, given_by


def write(tmp_path, text: str):
    p = tmp_path / "run.yaml"
    p.write_text(text)
    return p


class Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    steps: int | Literal["auto"] = "auto"
    rate: float = 1.0


class Root(BaseModel):
    model_config = ConfigDict(extra="forbid")
    inner: Inner = Inner()


def _errors(data: dict, overrides: dict[str, str] | None = None) -> str:
    with pytest.raises(ValidationError) as err:
        Root.model_validate(data)
    return format_errors(err.value, Root, "run.yaml", overrides or {})


def test_a_union_field_is_one_line_and_every_bad_field_has_its_own():
    text = _errors({"inner": {"steps": "many", "rate": "fast"}})
    lines = text.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("run.yaml: inner.steps: ") and lines[0].endswith("found 'many'")
    assert lines[1].startswith("run.yaml: inner.rate: ") and lines[1].endswith("found 'fast'")


def test_an_unknown_key_gets_the_closest_known_one():
    text = _errors({"inner": {"stpes": 3}, "iner": {}})
    assert "run.yaml: inner.stpes: unknown key (did you mean 'steps'?" in text
    assert "run.yaml: iner: unknown key (did you mean 'inner'?" in text
    assert "did you mean" not in _errors({"zzzzzz": 1})  # nothing close: no guess


def test_given_by_names_the_set_item_of_the_key_or_its_section():
    sets = {"inner.steps": "inner.steps=many", "train": "train={max_steps: 0}"}
    assert given_by("inner.steps", sets) == "--set inner.steps=many"
    assert given_by("train.max_steps", sets) == "--set train={max_steps: 0}"  # its section
    assert given_by("inner.rate", sets) is None  # the file's
    # an unknown section made by a --set item of a key inside it
    assert given_by("trian", {"trian.max_steps": "trian.max_steps=3"}) == "--set trian.max_steps=3"
    text = _errors({"inner": {"steps": "many"}}, {"inner.steps": "inner.steps=many"})
    assert text.startswith("--set inner.steps=many: inner.steps: ")


def test_unknown_keys_are_named(tmp_path):
    p = write(tmp_path, "pipeline:\n  batch_sise: 64\ntrian:\n  max_steps: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert f"{p}: pipeline.batch_sise: unknown key" in msg
    assert f"{p}: trian: unknown key" in msg
    # The message points at the list of keys and at the likely one.
    assert "`tfperf config` lists every key" in msg
    assert "did you mean 'batch_size'?" in msg and "did you mean 'train'?" in msg


def test_errors_name_the_set_option_a_value_came_from(tmp_path):
    p = write(tmp_path, "pipeline:\n  batch_size: 64\n")
    with pytest.raises(ConfigError) as err:
        load_config(p, ["pipeline.batch_size=big"])
    msg = str(err.value)
    assert msg.startswith("--set pipeline.batch_size=big: pipeline.batch_size: "), msg
    assert "found 'big'" in msg and str(p) not in msg
    with pytest.raises(ConfigError, match=r"^--set trian\.max_steps=3: trian: unknown key"):
        load_config(p, ["trian.max_steps=3"])
    # A whole section given by --set owns the keys inside it.
    with pytest.raises(ConfigError, match=r"^--set train=\{max_steps: 0\}: train\.max_steps: "):
        load_config(p, ["train={max_steps: 0}"])
    # A bad value in the file is still the file's, also when --set changes other keys.
    bad = write(tmp_path, "pipeline:\n  batch_size: -1\n")
    with pytest.raises(ConfigError) as err:
        load_config(bad, ["train.max_steps=3"])
    assert str(err.value).startswith(f"{bad}: pipeline.batch_size: ")
