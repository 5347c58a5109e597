"""The large_array finding: from_tensor_slices of large numpy arrays (built by a Python loop)
holds them in the graph; the finding names the sizes and the runnable change (numpy.savez, then
the `tfperf convert` command it prints, run here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from tfperf.doctor.graph import lint
from tfperf.doctor.rules import arrays as rules_arrays

TFPERF = str(Path(sys.executable).parent / "tfperf")


class _Graph:
    def __init__(self, ds):
        self.graph = lint.read_graph(ds)


def _arrays():
    rows = [np.full(64, i, np.float32) for i in range(4_096)]  # a Python loop feeding numpy
    return np.stack(rows), np.arange(4_096, dtype=np.int64)


def test_large_arrays_in_the_graph_get_the_convert_command(tmp_path, monkeypatch):
    x, y = _arrays()  # 1 MiB + 32 KiB
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    assert rules_arrays.rule_large_array(_Graph(ds)) == []  # below 256 MiB: nothing
    monkeypatch.setattr(rules_arrays, "LARGE_ARRAY_BYTES", 2**20)
    [f] = rules_arrays.rule_large_array(_Graph(ds))
    assert f.code == "large_array" and f.kind == "data"
    assert "1 MiB of arrays" in f.evidence and "x: [4096, 64]" in f.evidence
    assert "numpy.savez('data.npz', x=X, y=Y)" in f.change
    # The change as written: save the arrays, run the command it names, shards come out.
    np.savez(tmp_path / "data.npz", x=x, y=y)
    command = re.search(r"`(tfperf convert [^`]+)`", f.change).group(1)
    args = [TFPERF, *command.split()[1:]]
    done = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "data" / "arrays").glob("data-train.tfrecord-*"))


def test_a_source_without_arrays_gets_no_finding():
    ds = tf.data.Dataset.range(10).batch(2)
    assert rules_arrays.rule_large_array(_Graph(ds)) == []
