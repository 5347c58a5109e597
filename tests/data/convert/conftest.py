"""Fixtures of the convert tests: `data`, a working folder (the current directory, on
sys.path) holding d.npz (60 int64 rows of x) and boom_prep.py, a --preprocess module whose
`always` raises on every row and `late` on the 41st."""

from __future__ import annotations

import numpy as np
import pytest

BOOM = """
def always(row):
    raise ValueError("cannot use this row")

def late(row):
    if int(row["x"]) == 40:
        raise KeyError("label")
    return row
"""


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "boom_prep.py").write_text(BOOM)
    np.savez(tmp_path / "d.npz", x=np.arange(60, dtype=np.int64))
    return tmp_path
