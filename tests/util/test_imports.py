"""util/imports: user code named 'module:function' or 'file.py:function', found beside the run
file, imported once per file, and every mistake a UserError naming the run-file key."""

from __future__ import annotations

import pytest

from tfperf.errors import UserError
from tfperf.util.imports import load_object


def test_a_module_beside_the_run_file_is_found(tmp_path):
    (tmp_path / "mypipes_imports_a.py").write_text("class Ns:\n    def make():\n        return 7\n")
    make = load_object("mypipes_imports_a:Ns.make", field="data.pipeline", search_dir=str(tmp_path))
    assert make() == 7  # a dotted attribute is followed


def test_a_file_is_imported_once_and_may_hold_dots(tmp_path):
    (tmp_path / "RUN.optimized.py").write_text("import random\nTOKEN = random.random()\n")
    first = load_object("RUN.optimized.py:TOKEN", field="f", search_dir=str(tmp_path))
    again = load_object(str(tmp_path / "RUN.optimized.py") + ":TOKEN", field="f")
    assert first == again  # the same file is the same module


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected 'module:function'"),
        (":f", "expected 'module:function'"),
        ("json:", "expected 'module:function'"),
        ("no_such_module_xyz:f", "cannot import module 'no_such_module_xyz'"),
        ("json:no_such_attr", "module 'json' has no attribute 'no_such_attr'"),
        ("missing.py:f", "cannot import module 'missing.py'.*no such file"),
    ],
)
def test_mistakes_name_the_field(tmp_path, spec, message):
    with pytest.raises(UserError, match=f"model.fn: {message}"):
        load_object(spec, field="model.fn", search_dir=str(tmp_path))


def test_a_file_that_fails_to_import_can_be_fixed_and_loaded(tmp_path):
    broken = tmp_path / "broken_imports.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(RuntimeError, match="boom"):
        load_object("broken_imports.py:f", field="f", search_dir=str(tmp_path))
    broken.write_text("def f():\n    return 'fixed'\n")
    assert load_object("broken_imports.py:f", field="f", search_dir=str(tmp_path))() == "fixed"
