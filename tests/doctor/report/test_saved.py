"""What `tfperf doctor` leaves in the run folder for `tfperf report` (doctor/report/saved.py):
its --json dict and the run file as {train.out_dir}/doctor.json, a later doctor replacing it;
a folder that cannot be written says why instead of failing the doctor."""

from __future__ import annotations

import json

from tfperf.config import load_config
from tfperf.doctor.report.saved import save_result


def test_the_result_is_saved_in_the_run_folder_beside_the_run_file(tmp_path):
    run = tmp_path / "run.yaml"
    run.write_text("train:\n  out_dir: runs/a\n")
    cfg = load_config(run)
    path, why = save_result(cfg, {"diagnosis": {"verdict": "not input-bound"}, "fix": None})
    assert why is None and path == tmp_path / "runs" / "a" / "doctor.json"
    saved = json.loads(path.read_text())
    assert saved == {
        "runfile": cfg.source,
        "diagnosis": {"verdict": "not input-bound"},
        "fix": None,
    }
    path, why = save_result(cfg, {"diagnosis": {"verdict": "highly input-bound"}})
    assert why is None and json.loads(path.read_text())["diagnosis"]["verdict"] == (
        "highly input-bound"
    )


def test_a_folder_that_cannot_be_written_says_why(tmp_path):
    (tmp_path / "taken").write_text("a file where the run folder would go")
    run = tmp_path / "run.yaml"
    run.write_text("train:\n  out_dir: taken/a\n")
    path, why = save_result(load_config(run), {"diagnosis": {}})
    assert path == tmp_path / "taken" / "a" / "doctor.json"
    assert why is not None and why.startswith(("FileExistsError", "NotADirectoryError")), why
    assert not path.exists()
