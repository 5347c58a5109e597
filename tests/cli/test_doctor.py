"""`tfperf doctor` (cli/doctor.py) in this process, where no measurement is needed: --allow
parsed and a wrong name refused before anything runs, Ctrl-C printing what was measured so
far (as a table or --json) with exit 130, and --help. The doctor itself runs in
tests/doctor/."""

from __future__ import annotations

import json
import re

import pytest
import typer

from tfperf.cli.doctor import interrupted, parse_allow
from tfperf.doctor.probes.budget import Budget
from tfperf.errors import UserError
from tfperf.measure import Measurement, Run


def test_allow_names_the_changes_fix_may_make():
    assert parse_allow("precision, batch") == ["precision", "batch"]
    assert parse_allow("") == []
    with pytest.raises(UserError, match="--allow: expected .* of precision, batch, found 'xla'"):
        parse_allow("precision,xla")


def test_a_wrong_allow_exits_2_before_measuring(cli):
    res = cli("doctor", "--allow", "speed", "--json")
    assert res.exit_code == 2 and res.stdout == ""
    assert "--allow: expected a comma-separated list" in res.stderr


def _budget() -> Budget:
    budget = Budget(60)
    budget.measured["pipeline"] = Measurement("pipeline", [Run(1.0, 10, 1000), Run(1.0, 10, 1200)])
    budget.measured["training"] = Measurement("training", [Run(0.0, 0, 0)])  # nothing yet
    return budget


def test_ctrl_c_prints_what_was_measured_so_far(capsys):
    with pytest.raises(typer.Exit) as out:
        interrupted(_budget(), json_out=True)
    assert out.value.exit_code == 130
    said = json.loads(capsys.readouterr().out)
    assert said == {
        "interrupted": True,
        "measured_so_far": {"pipeline": {"examples_per_s": 1100.0, "repeats": 2}},
    }
    with pytest.raises(typer.Exit):
        interrupted(_budget(), json_out=False)
    text = capsys.readouterr().out
    assert "pipeline: 1,100 ex/s (2 repeats)" in text and "training" not in text
    with pytest.raises(typer.Exit):
        interrupted(Budget(60), json_out=False)
    assert "nothing yet" in capsys.readouterr().out


def test_help_names_every_option(cli):
    text = cli("doctor", "--help").stdout
    for option in ("--fix", "--probe-steps", "--repeats", "--budget", "--target", "--allow"):
        assert option in text, option


@pytest.mark.parametrize("option", ["--repeats", "--probe-steps"])
def test_a_count_below_one_is_a_clear_usage_error(cli, option):
    # These reached the config's validation and ended in a pydantic traceback.
    res = cli("doctor", option, "0")  # refused before any run file is read
    assert res.exit_code == 2
    flat = " ".join(re.sub("[│╭╮╰╯─]", " ", res.stderr).split())  # the error box unwrapped
    assert option in flat and "greater than or equal to 1" in flat, flat
    assert "Traceback" not in res.stderr + res.stdout
