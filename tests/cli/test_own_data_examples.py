"""The README's "Your own data and model" examples run as written: the commands of each
worked example (a CSV, an image folder) are read from the README and run in a fresh folder
(make the data, convert, train a few steps, evaluate): `tfperf` in this process (its
command-line app, as the real command runs it; no TensorFlow start-up per command), the
Python script as a subprocess. The model code the README shows is the example's own module."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARK = "<!-- tested by tests/cli/test_own_data_examples.py"
# A few training steps: enough to learn something, quick on 2 CPU cores (the small CNN on
# images needs more of them than the table's two dense layers).
STEPS = {"flowers": 40, "shapes": 100}

pytestmark = pytest.mark.slow


def readme_commands(example: str) -> list[str]:
    """The command lines of the README's block for `example` (flowers or shapes)."""
    for part in README.read_text().split(MARK)[1:]:
        block = part.split("```sh\n", 1)[1].split("```", 1)[0]
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if any(f"examples/own_data/{example}.yaml" in line for line in lines):
            return lines
    raise AssertionError(f"README.md has no tested block running {example}.yaml")


def run(line: str, cwd: Path, steps: int = 0) -> subprocess.CompletedProcess:
    """One README line in `cwd`: python as a subprocess, tfperf through its app in-process."""
    argv = shlex.split(line)
    if argv[0] == "python":
        cmd = [sys.executable, *argv[1:]]
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    if argv[1] == "train":
        argv += ["--max-steps", str(steps)]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)  # the README's paths are relative to the repository's root
        res = CliRunner().invoke(app, argv[1:])
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise res.exception
    return subprocess.CompletedProcess(argv, res.exit_code, res.stdout, res.stderr)


@pytest.fixture(scope="module", params=["flowers", "shapes"])
def example(request, tmp_path_factory):
    """(name, folder, {command line: finished process}) of one worked example."""
    name = request.param
    folder = tmp_path_factory.mktemp(name)
    shutil.copytree(ROOT / "examples" / "own_data", folder / "examples" / "own_data")
    done = {}
    for line in readme_commands(name):
        done[line] = proc = run(line, folder, STEPS[name])
        if proc.returncode != 0:
            break  # the next steps need this one
    else:
        line = f"tfperf evaluate examples/own_data/{name}.yaml --json"
        done[line] = run(line, folder)
    return name, folder, done


def test_every_command_exits_0(example):
    name, _, done = example
    lines = readme_commands(name)
    assert list(done)[: len(lines)] == lines
    for line, proc in done.items():
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-3000:]}"


def test_training_leaves_a_checkpoint_and_evaluate_reports_it(example):
    name, folder, done = example
    run_dir = folder / "runs" / "own_data" / f"{name}_run"
    assert (run_dir / "checkpoints" / f"ckpt-{STEPS[name]}.index").exists()
    assert (run_dir / "checkpoints" / "FINAL").exists()
    evaluated = done[f"tfperf evaluate examples/own_data/{name}.yaml"]
    assert "accuracy" in evaluated.stdout and "loss" in evaluated.stdout, evaluated.stdout
    result = done[f"tfperf evaluate examples/own_data/{name}.yaml --json"]
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)["metrics"]
    assert json.loads(result.stdout)["step"] == STEPS[name]
    # Better than chance: the model learned from the features it was given.
    chance = {"flowers": 1 / 3, "shapes": 1 / 2}[name]
    assert metrics["accuracy"] > chance, metrics


@pytest.mark.parametrize("module", ["flowers_model", "shapes_model"])
def test_readme_shows_the_example_modules_code(module):
    code = (ROOT / "examples" / "own_data" / f"{module}.py").read_text()
    shown = [
        block.split("```", 1)[0]
        for block in README.read_text().split("```python\n")[1:]
        if "def make_model" in block.split("```", 1)[0]
    ]
    # Each README block is a part of the module, word for word (bar a first comment line).
    matching = [b for b in shown if b.removeprefix(f"# examples/own_data/{module}.py\n") in code]
    assert matching, f"README.md shows no block of examples/own_data/{module}.py as it is"
