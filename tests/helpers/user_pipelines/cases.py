"""The suite of users' slow tf.data pipelines (issue 8, section 5): each case is a user's
`make_dataset(data_dir, batch_size=..., **kwargs)` written as tutorials write it, its
hand-tuned twin, a small Keras model, the data it reads and the doctor's expected first
finding. tests/doctor/test_user_pipelines.py checks them; benchmarks/bench_doctor_user.py
imports this module (as `helpers.user_pipelines.cases`, tests/ on its path) and measures
`tfperf doctor --fix` on each.

`write_run_file` writes what a user would have: a module with a `make_dataset(**kwargs)`
that calls the pipeline on the data folder, and a run file naming it (`data.pipeline`). That
module imports `helpers.user_pipelines`: a process that loads it needs tests/ on its path
(tests/conftest.py puts it on PYTHONPATH for the tests' subprocesses).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PACKAGE = __package__  # helpers.user_pipelines: the up_* modules' package

# Codes the doctor should give but has no rule for yet (see each case's `note`): none today.
MISSING_CODES: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Case:
    name: str  # also the slow function's name in `module`; the twin is `<name>_tuned`
    module: str  # up_records, up_memory or up_files, in PACKAGE
    data: str  # the up_data kind it reads
    model: str  # a function of up_models
    expected: str | None  # the doctor's expected first finding; None: no input advice
    note: str  # what is wrong, and what the expected finding should say
    also_right: tuple[str, ...] = ()  # other first findings that are as right
    same_kwargs: dict[str, Any] = field(default_factory=dict)  # for the same-examples check
    runs_as_is: bool = True  # False: the slow pipeline must never be run to its end
    batch_size: int = 64

    def functions(self) -> tuple[Any, Any]:
        """(the user's make_dataset, the hand-tuned twin)."""
        mod = importlib.import_module(f"{PACKAGE}.{self.module}")
        return getattr(mod, self.name), getattr(mod, f"{self.name}_tuned")

    def model_factory(self) -> Any:
        return getattr(importlib.import_module(f"{PACKAGE}.up_models"), self.model)


CASES = [
    Case(
        "per_example_parse",
        "up_records",
        "records",
        "vector_model",
        "per_example_parse",
        "parse_single_example per record before batch; batch first, one parse_example",
        # Its map is sequential too, and the twin also parses in parallel: named first when
        # the parallel what-if gains more than the vectorized one (twice beside two CPU hogs).
        also_right=("sequential_map",),
    ),
    Case(
        "no_interleave",
        "up_records",
        "records_gz",
        "vector_model",
        "no_interleave",
        "32 gzipped shards read one after another by one TFRecordDataset",
        # The records are counted and fit the RAM budget: caching them parsed is as right.
        also_right=("no_cache",),
    ),
    Case(
        "interleave_no_parallel",
        "up_records",
        "records_gz",
        "vector_model",
        "no_interleave",
        "interleave(cycle_length=8) without num_parallel_calls: still one file at a time",
        also_right=("no_cache",),
    ),
    Case(
        "shuffle_after_batch",
        "up_records",
        "records",
        "vector_model",
        "shuffle_after_batch",
        "batch().shuffle(): the same batches every epoch, only their order changes (a data "
        "finding: shuffle examples before batch)",
    ),
    Case(
        "repeat_before_shuffle",
        "up_records",
        "records",
        "vector_model",
        "repeat_before_shuffle",
        "repeat(3).shuffle(): examples of the next epoch mix in before this one is seen "
        "(a data finding: shuffle, then repeat)",
        same_kwargs={"epochs": 2},
    ),
    Case(
        "large_array",
        "up_memory",
        "arrays",
        "image32_model",
        "per_example_map",
        "from_tensor_slices of a 6 MB uint8 array (a graph constant), cast and scaled one "
        "image at a time",
        # Caching the scaled images removes the same per-example map from every epoch; with
        # both gains close, which ranks first follows the timing (no_cache first in 2 of 2
        # full-suite runs beside the other pytest worker, per_example_map first alone). Its
        # map is sequential too, and the twin also runs it in parallel: as right.
        also_right=("no_cache", "sequential_map"),
    ),
    Case(
        "from_generator",
        "up_memory",
        "arrays",
        "vector_model",
        "from_generator",
        "a Python generator over numpy rows: a GIL round trip per example",
    ),
    Case(
        "numpy_function",
        "up_memory",
        "arrays",
        "vector_model",
        "py_function",
        "numpy_function per example for arithmetic TensorFlow does on a batch",
    ),
    Case(
        "float64",
        "up_memory",
        "arrays",
        "vector_model",
        "float64",
        "numpy's float64 features go to a float32 model",
    ),
    Case(
        "huge_shuffle",
        "up_memory",
        "none",
        "vector_model",
        "shuffle_over_budget",
        "shuffle(200_000_000) over 200M procedurally made examples (~50 GB): the doctor "
        "must name it from the graph and never fill it",
        same_kwargs={"examples": 2048},
        runs_as_is=False,
    ),
    Case(
        "compute_bound",
        "up_memory",
        "arrays",
        "big_mlp",
        None,
        "a cheap in-memory pipeline (no prefetch) feeding a 3x2048 MLP: no input advice",
        batch_size=16,  # a short step: the doctor's probes stay quick
    ),
    Case(
        "sequential_heavy_map",
        "up_memory",
        "arrays",
        "image32_model",
        "sequential_map",
        "a heavy batched blur + random brightness map without num_parallel_calls",
        same_kwargs={"augment": False},
    ),
    Case(
        "cache_after_augment",
        "up_memory",
        "arrays",
        "image32_model",
        "cache_after_random",
        "cache() after a random flip/shift: every epoch replays epoch 1's augmentation "
        "(the doctor must say the cache freezes it, not advise caching)",
        same_kwargs={"augment": False},
    ),
    Case(
        "image_decode",
        "up_files",
        "jpegs",
        "image48_model",
        "sequential_map",
        "JPEG read, decode and resize one file at a time, sequential; decode cannot be "
        "vectorized: parallel map (and cache the decoded images)",
        also_right=("no_cache",),
    ),
    Case(
        "text_per_example",
        "up_files",
        "text",
        "text_model",
        "per_example_map",
        "split, hash and pad one sentence at a time; tf.strings works on a batch (ragged)",
        # Its map is sequential too, and the twin also runs it in parallel: named first when
        # the parallel what-if gains more than the vectorized one (on a loaded host, once).
        also_right=("sequential_map",),
    ),
    Case(
        "py_function_tokenizer",
        "up_files",
        "text",
        "text_model",
        "py_function",
        "a Python tokenizer in py_function per line",
    ),
    Case(
        "csv_per_line",
        "up_files",
        "csv",
        "vector_model",
        "per_example_map",
        "TextLineDataset + decode_csv per line; decode_csv takes a batch of lines",
    ),
]
BY_NAME = {c.name: c for c in CASES}


def data_dir(case: Case, root: Path) -> Path:
    """The case's data under `root` (one folder per kind, shared by cases), made once."""
    from . import up_data

    return up_data.make(case.data, Path(root) / case.data)


SHIM = '''"""{note}"""

from {package}.up_models import {model} as make_model
from {package}.{module} import {function} as user_pipeline


def make_dataset(batch_size={batch}, **kwargs):
    return user_pipeline({data!r}, batch_size=batch_size, **kwargs)
'''


def write_run_file(
    case: Case,
    folder: Path,
    data: Path,
    *,
    tuned: bool = False,
    doctor: dict[str, Any] | None = None,
) -> Path:
    """`folder/pipeline_<name>[_tuned].py` and `folder/<name>[_tuned].yaml` naming it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    function = f"{case.name}_tuned" if tuned else case.name
    module = f"pipeline_{function}"
    (folder / f"{module}.py").write_text(
        SHIM.format(
            note=case.note,
            package=PACKAGE,
            model=case.model,
            module=case.module,
            function=function,
            batch=case.batch_size,
            data=str(data),
        )
    )
    run: dict[str, Any] = {
        "data": {"pipeline": f"{module}:make_dataset"},
        "model": {"name": f"{module}:make_model", "loss": "mse"},
        "pipeline": {"batch_size": case.batch_size},
    }
    if doctor:
        run["doctor"] = doctor
    path = folder / f"{function}.yaml"
    path.write_text(yaml.safe_dump(run, sort_keys=False))
    return path
