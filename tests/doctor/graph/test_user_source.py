"""The source of the user's `data.pipeline: module:function` (doctor/graph/user_source.py):
the function's file, lines and first line number as `inspect` reads them (nothing runs),
and the line where a call is written, after or before another (comments left out, a chain
on one line kept in its order), so that a finding names the file and line to edit."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tfperf.config import config_from_dict, load_config
from tfperf.doctor.graph.user_source import UserSource, user_source

LINES = [
    "def make_dataset(batch_size=8):\n",
    "    ds = tf.data.Dataset.range(64)  # a .shuffle( in a comment is not code\n",
    "    ds = ds.repeat(3).shuffle(64)\n",
    "    ds = ds.batch(batch_size)\n",
    "    return ds.shuffle(4)\n",
]


def test_a_call_is_found_by_its_line_number():
    src = UserSource("my_input.py", LINES, 10)
    assert src.find(".shuffle(") == 12  # not the comment's on line 11
    assert src.find(".shuffle(", after=".batch(") == 14
    assert src.find(".shuffle(", after=".repeat(") == 12  # on the same line, after it
    assert src.find(".repeat(", before=".shuffle(") == 12
    assert src.find(".batch(", before=".repeat(") is None
    assert src.find(".cache(") is None and src.find(".shuffle(", after=".cache(") is None


def test_where_quotes_the_line():
    src = UserSource("my_input.py", LINES, 10)
    assert src.where(".batch(") == "my_input.py:13: `ds = ds.batch(batch_size)`"
    assert src.where(".prefetch(") is None


def test_the_run_files_function_is_read_from_its_module(tmp_path: Path):
    module = tmp_path / "user_src_pipe.py"
    module.write_text(
        textwrap.dedent(
            """\
            import tensorflow as tf


            def make(batch_size=8):
                return tf.data.Dataset.range(64).batch(batch_size)
            """
        )
    )
    run = tmp_path / "run.yaml"
    run.write_text("data:\n  pipeline: user_src_pipe:make\n")
    src = user_source(load_config(run))
    assert src is not None and Path(src.file) == module and src.start == 4
    assert src.lines[0].startswith("def make(") and src.find(".batch(") == 5


def test_no_source_without_a_python_function():
    assert user_source(config_from_dict({})) is None  # tfperf's own pipeline
    assert user_source(config_from_dict({"data": {"pipeline": "no_such_module:make"}})) is None
    # A function inspect cannot read (built in C): no file and line, no error.
    assert user_source(config_from_dict({"data": {"pipeline": "math:sqrt"}})) is None
