"""Shared test fixtures: quiet TensorFlow, tests/ on the subprocesses' PYTHONPATH (for
`helpers`), the `tfperf` command run in-process (`cli`) or as a real subprocess
(`tfperf_exe`), small real filesystems that fill up (`tmpfs`) and one real tf.data service
for the session (`shared_data_service`); the order and grouping of files for xdist. Tests
use tiny data in tmp_path."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfperf.util.startup import lean_tensorflow_import

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Every xdist worker imports TensorFlow while collecting: here, without the garbage
# collector's passes and frozen after (util.startup: ~10% of the import's CPU, and later
# full collections skip its objects). Not in the controller, which runs no test.
if "PYTEST_XDIST_WORKER" in os.environ:
    with lean_tensorflow_import():
        import tensorflow  # noqa: F401
# tests/ on the subprocesses' path too (pyproject's pytest `pythonpath` puts it on this
# process's): a `tfperf` child imports what its run file names, e.g.
# `helpers.slow_pipelines:clean`.
TESTS = str(Path(__file__).resolve().parent)
if TESTS not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [TESTS, os.getenv("PYTHONPATH")]))


class CliResult:
    def __init__(self, exit_code: int, stdout: str, stderr: str):
        self.exit_code, self.stdout, self.stderr = exit_code, stdout, stderr

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def cli():
    """Runs `tfperf ARGS...` in this process; returns exit_code, stdout and stderr."""
    from typer.testing import CliRunner

    from tfperf.cli.main import app

    def run(*args: str) -> CliResult:
        res = CliRunner().invoke(app, [str(a) for a in args])
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return CliResult(res.exit_code, res.stdout, res.stderr)

    return run


@pytest.fixture
def tfperf_exe() -> str:
    """The installed `tfperf` script of this interpreter's environment."""
    exe = Path(sys.executable).parent / "tfperf"
    assert exe.exists(), f"{exe}: tfperf is not installed in this environment"
    return str(exe)


@pytest.fixture
def tmpfs(tmp_path):
    """mount(name, size) -> a small real filesystem at tmp_path/NAME, for a real full disk
    (root only: the test is skipped where mounting is not permitted)."""
    mounted: list[Path] = []

    def mount(name: str, size: str) -> Path:
        where = tmp_path / name
        where.mkdir(parents=True, exist_ok=True)
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
        if subprocess.run(cmd, capture_output=True).returncode != 0:
            pytest.skip("mounting a small tmpfs is not permitted here")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        # Lazy: a child process that is still closing its files would keep a plain umount
        # busy and leave the mount behind (pytest then cannot remove tmp_path).
        subprocess.run(["umount", "--lazy", str(where)], check=False)


@pytest.fixture(scope="session")
def shared_data_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """grpc://127.0.0.1:PORT of one `tfperf data-service local --workers 2` (a dispatcher and
    2 worker processes) for the tests that only read from a tf.data service, each a job of its
    own (anonymous, or a job_name no other test uses); tests that fault a service start their
    own. The files that use it run in one xdist worker (see pytest_xdist_make_scheduler), so
    it starts once."""
    from helpers import service_cluster

    with service_cluster.service(tmp_path_factory.mktemp("shared_service"), workers=2) as address:
        yield address


@functools.cache
def _uses_shared_service(file: str) -> bool:
    path = Path(__file__).resolve().parents[1] / file
    return path.suffix == ".py" and "shared_data_service" in path.read_text()


# optionalhook: `pytest -p no:xdist` runs the suite in one process without this hook.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, except that the files using `shared_data_service` are one unit, sent
    to one worker (one service for all of them, not one per worker)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndSharedService(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return "shared_data_service" if _uses_shared_service(file) else file

    return FilesAndSharedService(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with the most `slow` tests first: `-n 4 --dist loadfile` hands out whole files
    in this order, so the long ones start early and short ones fill the gaps at the end."""
    slow: dict[str, int] = {}
    for item in items:
        file = item.nodeid.split("::")[0]
        slow[file] = slow.get(file, 0) + (item.get_closest_marker("slow") is not None)
    order = {file: rank for rank, file in enumerate(slow)}

    def key(item: pytest.Item) -> tuple[int, int]:
        file = item.nodeid.split("::")[0]
        return -slow[file], order[file]

    items.sort(key=key)
