"""runreport/run_dir: what train and the doctor leave in a run folder, read back with each
missing part named with the command that makes it; a folder that is not a run, or a
damaged JSON file, or one of the wrong shape (named with its field), is a UserError."""

from __future__ import annotations

import copy
import json

import pytest

from tfperf.errors import UserError
from tfperf.runreport.run_dir import (
    DOCTOR_NAME,
    EVAL_RESULTS,
    SUMMARY_NAME,
    RunRecord,
    missing_parts,
    read_run_dir,
    save_json,
    save_summary,
)
from tfperf.runreport.shapes import ShapeError


def test_save_summary_writes_the_run_file_beside_the_summary(tmp_path):
    assert save_summary(tmp_path / "run", "chess.yaml", {"steps": 40})
    saved = json.loads((tmp_path / "run" / SUMMARY_NAME).read_text())
    assert saved == {"runfile": "chess.yaml", "steps": 40}
    (tmp_path / "file").write_text("")
    assert not save_summary(tmp_path / "file", None, {})  # a file where the folder should be


def test_a_run_folder_reads_back_whole(tmp_path, diagnosis, fix, scalars_writer):
    run = tmp_path / "run"
    save_summary(run, "chess.yaml", {"steps": 40, "examples_per_sec": 1234.5})
    save_json(run / DOCTOR_NAME, {"runfile": "doctor.yaml", "diagnosis": diagnosis, "fix": fix})
    scalars_writer(run / "logs" / "train", {"loss": [(5, 0.5)]})
    scalars_writer(run / "logs" / "eval", {"loss": [(20, 0.6)]})
    rec = read_run_dir(run)
    assert rec.summary["examples_per_sec"] == 1234.5
    assert rec.doctor["diagnosis"]["verdict"] == "highly input-bound"
    assert list(rec.train) == ["loss"] and [s for s, _ in rec.eval["loss"]] == [20]
    assert rec.missing == {}
    assert rec.runfile == "doctor.yaml"  # the doctor's run file first


def test_eval_results_stand_in_for_eval_logs_and_a_torn_line_is_skipped(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lines = [
        json.dumps({"step": 20, "metrics": {"loss": 0.6, "mae": 0.3}}),
        json.dumps({"step": 10, "metrics": {"loss": 0.9}}),
        '{"step": 30, "metr',  # the evaluator was killed mid-line
    ]
    (run / EVAL_RESULTS).write_text("\n".join(lines))
    rec = read_run_dir(run)
    assert rec.eval == {"loss": [(10, 0.9), (20, 0.6)], "mae": [(20, 0.3)]}
    assert set(rec.missing) == {"summary", "doctor", "train"}


def test_each_missing_part_names_its_command():
    rec = RunRecord(summary={"runfile": "r.yaml"}, doctor={"diagnosis": {}, "fix": None})
    missing = missing_parts(rec)
    assert set(missing) == {"fix", "train", "eval"}
    assert "`tfperf doctor r.yaml --fix`" in missing["fix"]
    assert "`tfperf train r.yaml`" in missing["train"]
    assert "`tfperf evaluate r.yaml --watch --all`" in missing["eval"]
    nothing = missing_parts(RunRecord())
    assert "`tfperf train RUNFILE`" in nothing["summary"] and "doctor" in nothing


def test_the_commands_of_missing_parts_are_shell_quoted():
    # pasted, `tfperf train runs/a<b/run.yaml` read its input from a file called b/run.yaml
    rec = RunRecord(summary={"runfile": "runs/a<b/my run.yaml"}, doctor=None)
    missing = missing_parts(rec)
    assert "`tfperf doctor 'runs/a<b/my run.yaml'`" in missing["doctor"]
    assert "`tfperf train 'runs/a<b/my run.yaml'`" in missing["train"]
    assert "`tfperf train 'runs/a<b/my run.yaml' --evaluator`" in missing["eval"]


def test_folders_that_are_not_runs_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such folder; expected a run folder"):
        read_run_dir(tmp_path / "nowhere")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        read_run_dir(tmp_path / "f.txt")
    (tmp_path / "inner" / "checkpoints").mkdir(parents=True)
    with pytest.raises(
        UserError, match=r"holds nothing tfperf wrote.*Run folders inside it: .*inner"
    ):
        read_run_dir(tmp_path)


def test_a_damaged_summary_is_named_with_what_to_do(tmp_path):
    (tmp_path / SUMMARY_NAME).write_text("{not json")
    with pytest.raises(UserError, match=f"{SUMMARY_NAME}: cannot be read as JSON.*run the command"):
        read_run_dir(tmp_path)
    (tmp_path / SUMMARY_NAME).write_text("[1, 2]")  # JSON, but not tfperf's dict
    with pytest.raises(
        ShapeError, match=r"the top level: expected an object \{...\}, found a list"
    ):
        read_run_dir(tmp_path)


def _doctor(diagnosis, fix, edit):
    data = {"runfile": "run.yaml", "diagnosis": copy.deepcopy(diagnosis), "fix": copy.deepcopy(fix)}
    edit(data)
    return data


# Valid JSON of another shape: each made the report stop with a TypeError or KeyError.
WRONG_DOCTOR = {
    "stages_text": (
        lambda d: d["diagnosis"].update(stages="abc"),
        "field 'diagnosis.stages': expected a list [...], found text, 'abc'",
    ),
    "rate_text": (
        lambda d: d["diagnosis"]["pipeline"].update(examples_per_s="fast"),
        "field 'diagnosis.pipeline.examples_per_s': expected a number, found text, 'fast'",
    ),
    "no_verdict": (
        lambda d: d["diagnosis"].pop("verdict"),
        "field 'diagnosis.verdict': expected a field 'verdict', found nothing (no such field)",
    ),
    "stage_label": (
        lambda d: d["diagnosis"]["stages"][1].update(label=None),
        "field 'diagnosis.stages[1].label': expected text, found null",
    ),
    "trial_without_range": (
        lambda d: d["fix"]["trials"][0].pop("low"),
        "field 'fix.trials[0].low': expected a number (the trial has a ratio), found null",
    ),
    "check_a_list": (
        lambda d: d["fix"].update(check=[1, 2]),
        "field 'fix.check': expected an object {...}, found a list, [1, 2]",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_DOCTOR))
def test_a_doctor_json_of_the_wrong_shape_names_the_file_and_field(
    tmp_path, diagnosis, fix, case, cli
):
    edit, expected = WRONG_DOCTOR[case]
    save_json(tmp_path / DOCTOR_NAME, _doctor(diagnosis, fix, edit))
    res = cli("report", tmp_path)
    assert res.exit_code == 2, res.output
    msg = " ".join(res.stderr.split())
    assert f"{tmp_path / DOCTOR_NAME}: {expected}" in msg, msg
    assert "`tfperf doctor RUNFILE`" in msg and "Traceback" not in res.output
    assert not (tmp_path / "report.html").exists()


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        ({"final_loss": None}, "field 'final_loss': expected a number, found null"),
        ({"examples_per_sec": [1]}, "field 'examples_per_sec': expected a number, found a list"),
        ({"runfile": 3}, "field 'runfile': expected text, found a number, 3"),
    ],
)
def test_a_summary_json_of_the_wrong_shape_names_the_file_and_field(tmp_path, summary, expected):
    save_json(tmp_path / SUMMARY_NAME, {"steps": 10, "input_bound_fraction": 0.5, **summary})
    with pytest.raises(ShapeError) as err:
        read_run_dir(tmp_path)
    assert str(err.value).startswith(f"{tmp_path / SUMMARY_NAME}: {expected}")
    assert "`tfperf train RUNFILE`" in str(err.value)
