"""`tfperf report RUN_DIR` (cli/report.py) in this process: the path written on stdout, what
is missing on stderr, and a folder that is not a run (or its parent) as one paragraph with
exit 2. The page itself is tested in tests/runreport/."""

from __future__ import annotations

from pathlib import Path


def _write_scalars(log_dir: Path, values: dict[str, float]) -> None:
    """TensorBoard event files in `log_dir` with each tag's value at steps 10 and 20."""
    import tensorflow as tf

    with tf.summary.create_file_writer(str(log_dir)).as_default():
        for tag, value in values.items():
            for step in (10, 20):
                tf.summary.scalar(tag, value, step=step)


def test_a_folder_with_only_logs_names_what_is_missing_and_its_command(tmp_path, cli):
    only_logs = tmp_path / "only_logs"
    _write_scalars(only_logs / "logs" / "train", {"step/examples_per_sec": 900.0, "loss": 0.7})
    _write_scalars(only_logs / "logs" / "eval", {"loss": 0.8})
    res = cli("report", only_logs, "-o", tmp_path / "r.html")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.strip() == str(tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert "no diagnosis (doctor.json" in html and "`tfperf doctor RUNFILE`" in html
    assert "no training summary (summary.json)" in html and "`tfperf train RUNFILE`" in html
    assert 'id="chart-training"' in html and 'id="chart-eval"' in html
    assert 'id="chart-stages"' not in html
    assert "not in the report" in res.stderr and "doctor.json" in res.stderr


def test_a_folder_that_is_not_a_run_is_one_paragraph(tmp_path, cli):
    missing = tmp_path / "nowhere"
    res = cli("report", missing)
    assert res.exit_code == 2
    text = res.stderr
    assert f"{missing}: no such folder; expected a run folder" in text and "Traceback" not in text
    assert "summary.json" in text and "`tfperf train RUNFILE`" in text
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("nothing tfperf wrote\n")
    res = cli("report", other)
    assert res.exit_code == 2 and "holds nothing tfperf wrote" in res.stderr
    res = cli("report", tmp_path)  # the parent of a run folder: named in the error
    assert res.exit_code == 2
    (tmp_path / "inner" / "logs").mkdir(parents=True)
    res = cli("report", tmp_path)
    assert "Run folders inside it:" in res.stderr and "inner" in res.stderr


def test_help_explains_the_command(cli):
    res = cli("report", "--help")
    assert res.exit_code == 0
    for text in ("--output", "report.html", "doctor.json", "summary.json", "offline"):
        assert text in res.stdout, text
