"""Distance maps on this machine: the thesis's input (distance maps computed from raw
clicks by a plain Python function, per pixel and per click, per example, every step)
against tfperf's (maps computed once by `convert`, training only reads them), side by side
through tfperf.measure: the pipeline alone, training with the workload's U-Net and tfperf's
train step, and that train step's compute limit (one cached batch), at 64x64 and 256x256.
Target: >= 20x. Prints a markdown section.

    python benchmarks/bench_distance_maps.py [--quick] [--repeats N]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from common import DATA_ROOT, machine, parse_args, rate, say, table

from tfperf.measure import (
    cached_batch,
    compare,
    pipeline_probe,
    side_by_side,
    training_probe,
)

TARGET = 20.0
THESIS_MS_PER_IMAGE = 1000 / 2.4  # the thesis: 2.4 images/s with the maps computed per step


def write_data(root: Path, n: int, seed: int = 0, **options: Any) -> Path:
    """train (maps computed offline) and train_raw (clicks) shards plus manifest.json,
    as `tfperf convert --workload distance_maps` lays them out."""
    import tensorflow as tf

    from tfperf.data.manifest import Manifest, ShardInfo, SplitInfo, save_manifest
    from tfperf.workloads import get_workload

    wl = get_workload("distance_maps", **options)
    convert = wl.offline_preprocess()
    root.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split, schema, pre in (
        ("train", wl.schema(), convert),
        ("train_raw", wl.raw_schema(), None),
    ):
        name = f"{split}.tfrecord-00000-of-00001"
        with tf.io.TFRecordWriter(str(root / name)) as w:
            for row in wl.generate(n, seed):
                w.write(schema.encode(pre(row) if pre else row))
        shard = ShardInfo(file=name, records=n, bytes=(root / name).stat().st_size, sha256="0" * 64)
        splits[split] = SplitInfo(
            shards=[shard], records=n, schema=None if pre else wl.raw_schema()
        )
    save_manifest(
        Manifest(name="distance_maps", schema=wl.schema(), splits=splits, workload="distance_maps"),
        root,
    )
    return root


def python_ms_per_image(size: int, n: int = 16, passes: int = 3) -> float:
    """Milliseconds of the original's Python distance maps for one size x size image (the
    fastest of a few passes: the least disturbed by the other users of the cores)."""
    from tfperf.workloads.distance_maps import DistanceMapsWorkload, distance_maps_python

    rows = [r["clicks"].tolist() for r in DistanceMapsWorkload(image_size=size).generate(n)]
    best = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        for clicks in rows:
            distance_maps_python(clicks, size)
        best = min(best, (time.perf_counter() - t0) / n * 1000)
    return best


def measure_size(size: int, n: int, budget: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Each pipeline alone, training on each, and the compute limit, in interleaved repeats
    (tfperf.measure.side_by_side): a `Measurement` per row key.

    The run file has no image-size knob, so the datasets come from the workload's API
    (the same calls `make_input_dataset` makes) over data written for `size`."""
    from tfperf.config import PipelineConfig, config_from_dict
    from tfperf.data.manifest import load_manifest
    from tfperf.data.pipeline import make_dataset
    from tfperf.doctor.probes.target import build_target
    from tfperf.workloads import get_workload

    root = DATA_ROOT / ("distance_maps_a" if size == 64 else f"distance_maps_a_{size}")
    if not (root / "manifest.json").exists() or load_manifest(root).splits["train"].records != n:
        say(f"data {size}x{size}")
        write_data(root, n, image_size=size)
    wl = get_workload("distance_maps", image_size=size)
    m = load_manifest(root)
    batch = 32
    # A shuffle buffer of the whole (small) split, not the default 10,000 records: at
    # 256x256 that would hold ~1 GiB of repeated examples.
    opts = PipelineConfig(batch_size=batch, shuffle_buffer=n)
    datasets = {
        "original": wl.original_dataset(m.shard_paths(root, "train_raw"), batch, training=True),
        "tuned": make_dataset(
            m.shard_paths(root, "train"),
            opts,
            training=True,
            parse=wl.schema().parse_batch,
            preprocess=wl.preprocess_batch,
            records=n,
        ),
    }
    cfg = config_from_dict({"workload": "distance_maps"})
    # One model and train step per variant, built once (their element specs differ: the
    # original drops the remainder, so its batch dimension is static).
    runners = {v: build_target(cfg, ds.element_spec, batch).run_steps for v, ds in datasets.items()}
    steps, warmup, min_s = budget["steps"], budget["warmup"], budget["min_seconds"]
    probes = [
        pipeline_probe(f"pipe {v}", ds, batches=steps, warmup=warmup, min_seconds=min_s)
        for v, ds in datasets.items()
    ]
    feeds = [(f"train {v}", runners[v], ds) for v, ds in datasets.items()]
    feeds.append(("compute", runners["tuned"], cached_batch(datasets["tuned"])))
    probes += [
        training_probe(name, run, ds, examples_per_step=batch, **budget) for name, run, ds in feeds
    ]

    def on_run(name: str, r: int) -> None:
        if name == "compute":
            say(f"{size}x{size}: repeat {r + 1}/{repeats} done")

    return side_by_side(probes, repeats=repeats, on_run=on_run)


def rows_for(size: int, res: dict[str, Any]) -> list[list[str]]:
    """The table's rows for one image size: rates are medians, ratios paired."""

    def row(what: str, original: str, tuned: str, ceiling: bool = False) -> list[str]:
        c = compare(res[original], res[tuned])
        orig = "-" if ceiling else rate(res[original].examples_per_s.median)
        hit = "-" if ceiling else ("yes" if c.ratio >= TARGET else "**no**")
        paired = f"{c.ratio:.1f}x ({c.low:.1f}-{c.high:.1f})" + (" ceiling" if ceiling else "")
        return [f"{size}x{size}: {what}", orig, rate(res[tuned].examples_per_s.median), paired, hit]

    return [
        row("pipeline alone", "pipe original", "pipe tuned"),
        row("training (U-Net + train step)", "train original", "train tuned"),
        row("compute limit (one cached batch)", "train original", "compute", ceiling=True),
    ]


def main() -> int:
    args = parse_args(__doc__.split("\n\n")[0])

    n = 128 if args.quick else 512
    repeats = args.repeats or (2 if args.quick else 5)
    # Windows of >= 3 s and paired, interleaved repeats: the 2 cores are shared, and short
    # unpaired windows once gave a ratio of 0.7x that did not reproduce (see BENCHMARKS.md).
    min_seconds = 0.5 if args.quick else 3.0
    small = {"steps": 8, "warmup": 2, "min_seconds": min_seconds}
    # 256x256 costs 16x more per example: 2 batches per call keep a repeat short.
    big = {"steps": 2, "warmup": 1, "min_seconds": min_seconds}
    t0 = time.perf_counter()
    cost = {s: python_ms_per_image(s) for s in (64, 256)}
    res64 = measure_size(64, n, small, repeats)
    res256 = measure_size(256, n // 4, big, max(2, repeats - 2))
    took = time.perf_counter() - t0
    near = compare(res64["compute"], res64["train tuned"]).ratio  # paired, like the table
    print("## Distance maps per step (Python, per pixel and click) vs computed once in convert\n")
    print(
        f"{machine()}. distance_maps workload, batch 32, {n} examples at 64x64 and "
        f"{n // 4} at 256x256; medians of {repeats} (64x64) and {max(2, repeats - 2)} "
        f"(256x256) interleaved repeats, ratios are medians of per-repeat pairs with "
        f"their range ({took:.0f} s). Target: tfperf >= {TARGET:.0f}x the original.\n"
    )
    headers = ["measure", "original ex/s", "tfperf ex/s", "tfperf/original", "target"]
    print(table(headers, rows_for(64, res64) + rows_for(256, res256)))
    print(
        f"\nThe original's Python distance maps cost {cost[64]:.1f} ms per 64x64 image and "
        f"{cost[256]:.0f} ms per 256x256 image here; the thesis's 2.4 images/s implies "
        f"~{THESIS_MS_PER_IMAGE:.0f} ms per image. tfperf's training runs at "
        f"{near:.0%} of the compute limit at 64x64 (median of pairs): once the maps are "
        "precomputed the U-Net's compute bounds training on this CPU, so the training "
        "ratio cannot exceed compute limit / original (the 'ceiling' rows). The thesis's "
        "GPU had a compute limit far above its 2.4 images/s input, hence its ~20x."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
