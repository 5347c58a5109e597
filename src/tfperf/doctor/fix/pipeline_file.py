"""What `tfperf doctor --fix` writes for a `data.pipeline: module:function` run file:
RUNFILE.optimized.py, a `make_dataset(**kwargs)` that calls the user's function and applies
the kept rewrites through `tfperf.apply_rewrites`, and RUNFILE.optimized.yaml, the original
run file pointing data.pipeline at it; plus each kept rewrite as an edit of the user's own
code (file and line: graph/user_source.py). Nothing is timed here."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from tfperf.config import RunConfig
from tfperf.doctor.fix.candidates import PARALLEL_BATCH
from tfperf.doctor.fix.runfile import write_run_file
from tfperf.doctor.fix.trials import FixResult
from tfperf.doctor.graph import lint
from tfperf.doctor.graph.user_source import user_source
from tfperf.doctor.rules import REWRITES, Rewrite
from tfperf.util.files import write_text_atomic

if TYPE_CHECKING:
    import tensorflow as tf

_MODULE = '''"""Written by `tfperf doctor --fix` from {source}.

{summary}.
It calls your pipeline {spec} and applies the rewrites the doctor kept, in training only
(evaluation reads your pipeline as it is), each checked to yield the same examples:
{kept_lines}
The same changes as edits of your own code:
{edits}
To train on your pipeline as it was, point data.pipeline back at {spec}.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import tfperf
from tfperf.util.imports import load_object

# The rewrites kept, in the order they were tried (names as `tfperf doctor --fix` prints).
KEPT = {kept}

# {spec} is looked up from the original run file's folder, as the run file did.
user_pipeline = load_object(
    {spec!r}, field="data.pipeline", search_dir=str(Path(__file__).parent / {home!r})
)


def make_dataset(**kwargs: Any) -> Any:
    """{spec} called with the arguments it declares, then the kept rewrites (training)."""
    training = kwargs.get("training", True)
    params = inspect.signature(user_pipeline).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        kwargs = {{k: v for k, v in kwargs.items() if k in params}}
    ds = user_pipeline(**kwargs)
    return tfperf.apply_rewrites(ds, KEPT) if training else ds
'''


def optimized_paths(out: Path) -> tuple[Path, Path]:
    """(RUNFILE.optimized.yaml, RUNFILE.optimized.py) for the run file's `out`."""
    out = Path(out)
    return out, out.with_suffix(".py")


def write_optimized_pipeline(
    cfg: RunConfig, result: FixResult, out: Path, header: str
) -> list[str]:
    """Writes what --fix kept for a data.pipeline run file (`result`: a FixResult) and
    returns the paths written: the module and the run file pointing at it when a rewrite
    was kept, the run file alone for train.* changes only, nothing when nothing was kept."""
    yaml_path, py_path = optimized_paths(out)
    changes = dict(result.run_file_changes)
    written = []
    if result.pipeline_changes:
        home = os.path.relpath(_run_file_folder(cfg), py_path.resolve().parent)
        text = _MODULE.format(
            source=Path(cfg.source).name if cfg.source else "a run file built in memory",
            # The report's headline, and why each change was kept (a speed trial's figures,
            # or a RAM cap kept without one), so the file says what the report says.
            summary=header.splitlines()[0].removeprefix("# written by `tfperf doctor --fix`: "),
            kept_lines="\n".join(
                f"  - {t.change}: {t.row()['ratio_text']}, {t.reason}".replace(": -, ", ": ")
                for t in result.trials
                if t.kept
            ),
            spec=cfg.data.pipeline,
            edits="\n".join(f"  - {e}" for e in result.code_edits) or "  (none found)",
            kept=repr(list(result.pipeline_changes)),
            home=home,
        )
        py_path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(py_path, text)
        written.append(str(py_path))
        changes["data.pipeline"] = f"{py_path.name}:make_dataset"
    if changes:
        write_run_file(cfg, changes, yaml_path, header)
        written.append(str(yaml_path))
    return written


def _run_file_folder(cfg: RunConfig) -> Path:
    return Path(cfg.source).resolve().parent if cfg.source else Path.cwd()


# ---- each kept rewrite as an edit of the user's code ---------------------------------------
def code_edits(cfg: RunConfig, kept: list[str], fixed: tf.data.Dataset | None = None) -> list[str]:
    """'file:line: what to change' for each kept rewrite of the user's data.pipeline
    function (the function's own lines when `inspect` finds its source); `fixed`, the
    pipeline --fix returns, says which map a kept cache follows."""
    if not kept:
        return []
    src = user_source(cfg)
    if src is None:
        return [f"{name}: {_rewrite(name).edit}" for name in kept]
    cached = fixed is not None and any(_rewrite(name).at == "cache" for name in kept)
    after = _cached_fn(fixed) if cached and fixed is not None else None
    return [_edit(name, src.file, src.lines, src.start, after) for name in kept]


# A traced map function's name: __inference_Dataset_map_load_and_decode_18.
_TRACED = re.compile(r"^__inference_Dataset_(?:map|parallel_map|interleave|flat_map)_(\w+?)_\d+$")


def _cached_fn(fixed: tf.data.Dataset) -> str | None:
    """The Python name of the function whose map the first in-memory cache of `fixed`
    follows (None: no such cache, or a lambda)."""
    stages = lint.read_graph(fixed).stages
    cache = next((s for s in stages if s.kind == "cache"), None)
    if cache is None or cache.index == 0:
        return None
    before = stages[cache.index - 1]
    found = _TRACED.match(before.functions[0]) if before.functions else None
    name = found.group(1) if found else None
    return name if name and name.isidentifier() and name != "lambda" else None


# Each kept rewrite's code edit, by its label: the rules' rewrites (rules/) and those no rule
# asks for (candidates.py); a name neither knows gets the generic one.
_EDITS = {label: r for label, r in REWRITES.items() if r.edit is not None}
_EDITS[PARALLEL_BATCH.label] = PARALLEL_BATCH
_OTHER = Rewrite("other", "apply it where the pipeline is built")


def _rewrite(name: str) -> Rewrite:
    return _EDITS.get(name, _OTHER)


def _edit(name: str, where: str, lines: list[str], start: int, after: str | None = None) -> str:
    """'name: file:line: change' with the line of the user's function it concerns (for a
    cache, the map of `after` where the function calls it by name)."""
    rewrite = _rewrite(name)
    kind = rewrite.at
    code = [line.split("#")[0] for line in lines]
    at = _line_of(kind, code)
    if kind == "cache" and after is not None:
        calls = re.compile(rf"\.(?:map|interleave|flat_map)\(\s*{re.escape(after)}\b")
        at = next((i for i, c in enumerate(code) if calls.search(c)), at)
    line = start + (at if at is not None else 0)
    text = rewrite.edit
    assert text is not None  # _EDITS and _OTHER hold only rewrites with an edit
    if kind == "cache" and at is not None and "_dataset_from_directory(" in code[at]:
        text = _KERAS_CACHE  # Keras' loader batches and shuffles inside: cache its output
    if kind == "vectorize":
        text += _parse_hint(code, start)
    quoted = lines[at if at is not None else 0].strip()
    # The line it names, quoted: a reader sees at once whether it is the one to edit.
    return f"{name}: {where}:{line}: {text} (the line: `{quoted}`)"


def _parse_hint(code: list[str], start: int) -> str:
    """'; tf.io.parse_example ...' when the function parses one example at a time (only
    then: an edit names what the user's code calls, nothing else)."""
    at = next((i for i, c in enumerate(code) if "parse_single_example(" in c), None)
    if at is None:
        return ""
    return (
        f"; parse the batch with tf.io.parse_example instead of the tf.io.parse_single_example "
        f"of line {start + at}"
    )


_KERAS_CACHE = (
    "cache Keras' decoded images: image_dataset_from_directory(..., shuffle=False), then "
    ".unbatch().cache().shuffle(number of images).batch(batch_size) (each file read and "
    "decoded once, every epoch reshuffled)"
)


# The call a kind of change edits (Rewrite.at), for kinds whose line is that call's.
_CALLS = {
    "reads": ("TFRecordDataset(", ".interleave("),
    "batch": (".batch(",),
    "flat_map": (".flat_map(",),
    "parse_batch": ("parse_single_example(", ".map("),
    "shuffle": (".shuffle(",),
    "gather": ("timeseries_dataset_from_array(",),
    "source": ("timeseries_dataset_from_array(", "from_tensor_slices(", "from_tensors("),
    "csv": ("make_csv_dataset(", "CsvDataset("),
}


def _line_of(kind: str, code: list[str]) -> int | None:
    """Index of the line a kind of change (Rewrite.at) concerns, in the function's source
    lines: for a kind not named here, the last return."""
    maps = [i for i, c in enumerate(code) if ".map(" in c or ".interleave(" in c]
    batches = [i for i, c in enumerate(code) if ".batch(" in c]
    returns = [i for i, c in enumerate(code) if c.strip().startswith("return")]
    if kind in ("vectorize", "batch_move"):
        before = [i for i in maps if batches and i <= batches[0]]
        first_or_last = 0 if kind == "vectorize" else -1
        return before[first_or_last] if before else (maps[0] if maps else None)
    if kind == "parallel":
        slow = [i for i in maps if "num_parallel_calls" not in code[i]]
        return slow[0] if slow else (maps[0] if maps else None)
    if kind == "cache":
        shuffles = [
            i
            for i, c in enumerate(code)
            if any(k in c for k in (".shuffle(", ".repeat(", "list_files("))
        ]
        return shuffles[0] if shuffles else (returns[-1] if returns else None)
    if kind == "float32" and maps:
        return maps[-1]
    hits = [i for i, c in enumerate(code) if any(k in c for k in _CALLS.get(kind, ()))]
    if hits:
        return hits[0]
    return returns[-1] if returns else None
