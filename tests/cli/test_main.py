"""cli/main.py: the `tfperf` app's --help of every command, rendered wide (COLUMNS=200) in this
process: paragraphs flow as one line each instead of keeping the source's hard line breaks
(reflow), literal brackets and braces show as written (rich markup is escaped), and the
command list has one line per command, in the documented order."""

from __future__ import annotations

import functools

import pytest
from typer.testing import CliRunner

from tfperf.cli.main import COMMANDS, app, reflow

# (command, a sentence that the help source breaks over two lines).
SENTENCES = [
    (
        [],
        "Convert raw data to sharded TFRecord files plus manifest.json (heavy preprocessing "
        "done once, offline).",
    ),
    (
        [],
        "Show a converted dataset: splits, shards, record counts, schema and one decoded "
        "example; --verify checks every shard.",
    ),
    (
        ["bench"],
        "--compare original also measures the workload's original pipeline, interleaved with "
        "the tuned one (A B A B ...), and prints tuned/original.",
    ),
    (
        ["doctor"],
        "Works on tfperf pipelines (a workload or data.dir) and on any 'module:function' "
        "returning a tf.data.Dataset (data.pipeline), with any Keras 3 model (model.name).",
    ),
    (
        ["profile"],
        "Converted with xprof when the profile extra is installed (pip install "
        "'tfperf[profile]'), else read straight from the XSpace proto (coarser, same events).",
    ),
    (
        ["train"],
        "train.precision: auto | float32 | mixed_float16 | mixed_bfloat16 (auto times each "
        "policy the hardware runs and keeps the fastest with a finite loss).",
    ),
    (
        ["evaluate"],
        "Prints loss and metrics; without --watch nothing is written. With --watch, "
        "eval.metric and eval.mode choose best/.",
    ),
    (
        ["cluster-server"],
        "The chief is the coordinator: `tfperf train RUN --set train.strategy=parameter_server "
        "--set train.cluster=cluster.yaml`, started after (or with) the servers.",
    ),
]


@functools.cache
def help_text(*command: str) -> str:
    """`tfperf COMMAND --help` through the app in this process, 200 columns wide (each
    command's once)."""
    res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize(("command", "sentence"), SENTENCES)
def test_help_paragraphs_flow_on_one_line(command, sentence):
    text = help_text(*command)
    assert any(sentence in line for line in text.splitlines()), text


def test_cluster_yaml_example_shows_verbatim():
    text = help_text("cluster-server")
    example = '{chief: ["10.0.0.1:2222"], worker: ["10.0.0.2:2222"], ps: ["10.0.0.3:2222"]}'
    assert example in text
    assert "cluster.yaml: {job: [host:port, ...]} for chief, worker, ps." in text


def test_command_list_has_one_line_per_command():
    top = help_text()
    panel = top[top.index("Commands") :].splitlines()[1:]
    rows = [line.strip("│ ") for line in panel if line.startswith("│")]
    names = [row.split()[0] for row in rows]
    # A description that continued on a line of its own would start without a command name.
    assert names == [name.replace("_", "-") for name in COMMANDS], top


def test_reflow_joins_paragraph_lines_and_keeps_indented_items():
    text = """
        A sentence broken
        over two lines.

        Keys:
          a: the first item,
            continued deeper
          b: the second

        \b
        Last paragraph.
    """
    assert reflow(text) == (
        "A sentence broken over two lines.\n\n"
        "Keys:\n  a: the first item, continued deeper\n  b: the second\n\n"
        "Last paragraph."
    )
