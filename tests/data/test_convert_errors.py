"""convert's errors are one paragraph and exit 2: a --preprocess function that raises (named
with the row, counted from 1, and the exception), an --out that cannot be written; a
failed convert removes the empty folders it made and nothing else."""

from __future__ import annotations

import numpy as np
import pytest

from tfperf.data.convert.run import ConvertError, PreprocessError, convert
from tfperf.errors import UserError

BOOM = """
def always(row):
    raise ValueError("cannot use this row")

def late(row):
    if int(row["x"]) == 40:
        raise KeyError("label")
    return row
"""


def _one_paragraph(res) -> str:
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    text = res.stderr.strip()
    assert text.startswith("error:") and "\n\n" not in text, text
    return " ".join(text.split())


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "boom_prep.py").write_text(BOOM)
    np.savez(tmp_path / "d.npz", x=np.arange(60, dtype=np.int64))
    return tmp_path


def test_preprocess_that_raises_on_every_row(data, cli):
    res = cli("convert", "d.npz", "--out", "o", "--preprocess", "boom_prep:always", "--quiet")
    msg = _one_paragraph(res)
    assert "--preprocess boom_prep:always raised ValueError: cannot use this row" in msg, msg
    assert "row 1" in msg and "boom_prep.py, line 3" in msg
    assert issubclass(PreprocessError, UserError)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_preprocess_that_raises_on_one_row_names_it_from_1(data, cli, workers):
    args = ["--preprocess", "boom_prep:late", "--shard-size", "200", "--workers", workers]
    res = cli("convert", "d.npz", "--out", "o", "--quiet", *args)
    msg = _one_paragraph(res)
    assert "d.npz: row 41: --preprocess boom_prep:late raised KeyError: 'label'" in msg, msg


def test_out_is_a_file_or_under_a_file(data, cli):
    (data / "taken").write_text("a file, not a folder")
    res = cli("convert", "d.npz", "--out", "taken", "--quiet")
    msg = _one_paragraph(res)
    assert "--out taken: cannot write the dataset there" in msg and "a file" in msg, msg
    res = cli("convert", "d.npz", "--out", "taken/sub/dir", "--quiet")
    msg = _one_paragraph(res)
    assert "--out taken/sub/dir" in msg and "taken is a file" in msg, msg
    assert (data / "taken").read_text() == "a file, not a folder"


def test_a_failed_convert_removes_only_the_empty_folders_it_made(data):
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "new" / "deeper" / "o", preprocess="boom_prep:always")
    assert not (data / "new").exists()
    # a failure while writing, before any shard was finished: nothing to resume from
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "new" / "o", preprocess="boom_prep:late", workers=1)
    assert not (data / "new").exists()
    (data / "kept").mkdir()
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "kept" / "o", preprocess="boom_prep:always")
    assert (data / "kept").is_dir() and not (data / "kept" / "o").exists()
    (data / "busy").mkdir()
    (data / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ConvertError):
        convert(data / "d.npz", data / "busy", preprocess="boom_prep:always")
    assert sorted(p.name for p in (data / "busy").iterdir()) == ["notes.txt"]
