"""A built-in workload's data on disk: its generator's rows converted to shards, split
`train` and `eval` with the workload's offline preprocessing (heavy work done once),
plus `train_raw`/`eval_raw` untouched when the workload's original pipeline reads raw
data. Generation is the workload's; writing is data/convert/'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfperf.data.convert.options import PreprocessFactory
from tfperf.data.convert.run import convert
from tfperf.data.manifest import Manifest
from tfperf.data.sources import IterableSource
from tfperf.workloads import Workload, get_workload

# Eval rows come from another seed so that they never repeat training rows.
EVAL_SEED_OFFSET = 1_000_003


def workload_offline_step(name: str, options: dict[str, Any]) -> Any:
    """The built-in workload `name`'s offline step, rebuilt (in a convert worker process)."""
    return get_workload(name, **options).offline_preprocess()


def offline_preprocess_ref(workload: Workload) -> Any:
    """The workload's offline step as `convert` takes it: a PreprocessFactory when
    get_workload rebuilds the same workload (worker processes then rebuild the step, a
    closure that does not pickle), else the function itself; None when it has none."""
    fn = workload.offline_preprocess()
    if fn is None:
        return None
    try:
        same = type(get_workload(workload.name, **workload.options)) is type(workload)
    except (ValueError, TypeError):  # not built in, or options it does not take
        same = False
    if not same:
        return fn
    opts = ", ".join(f"{k}={v!r}" for k, v in sorted(workload.options.items()))
    return PreprocessFactory(
        f"{__name__}:workload_offline_step",
        {"name": workload.name, "options": dict(workload.options)},
        f"workload {workload.name}: offline_preprocess({opts})",
    )


def write_workload_data(
    workload: Workload,
    out_dir: str | Path,
    *,
    examples: int,
    eval_examples: int,
    seed: int = 0,
    progress: bool = True,
    workers: int | None = None,
    shard_bytes: int | None = None,
    compression: str = "",
    resume: bool = False,
) -> Manifest:
    """Writes splits train/eval (and train_raw/eval_raw when the original needs raw rows)
    into out_dir and returns the manifest that lists them all. resume: each split continues
    an interrupted run (finished splits are verified and kept), as `convert --resume`."""
    manifest: Manifest | None = None
    pre = offline_preprocess_ref(workload)
    plan: list[tuple[str, int, int, bool]] = [
        ("train", examples, seed, True),
        ("eval", eval_examples, seed + EVAL_SEED_OFFSET, True),
    ]
    if workload.original_needs_raw:
        plan += [
            (workload.raw_split("train"), examples, seed, False),
            (workload.raw_split("eval"), eval_examples, seed + EVAL_SEED_OFFSET, False),
        ]
    extra: dict[str, Any] = {} if shard_bytes is None else {"shard_bytes": shard_bytes}
    for split, n, split_seed, tuned in plan:
        if n <= 0:
            continue
        # The seed is in the label, which --resume compares: another seed is another source.
        label = f"workload {workload.name} ({split}, seed {split_seed})"
        rows = IterableSource(workload.generate(n, split_seed), length=n, label=label)
        manifest = convert(
            rows,
            out_dir,
            schema=workload.schema() if tuned else workload.raw_schema(),
            name=workload.name,
            split=split,
            preprocess=pre if tuned else None,
            workers=workers,
            progress=progress,
            compression=compression,
            workload=workload.name,
            resume=resume,
            **extra,
        )
    if manifest is None:
        raise ValueError("write_workload_data: examples and eval_examples are both 0")
    return manifest
