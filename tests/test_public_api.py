"""The public API: every exported name resolves, and `import tfperf` does not pull in
TensorFlow (the command line's --help and config validation stay fast)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tfperf


def test_every_exported_name_resolves():
    for name in tfperf.__all__:
        assert getattr(tfperf, name) is not None, name


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tfperf.nope  # noqa: B018


def test_import_does_not_load_tensorflow():
    code = "import sys, tfperf; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
