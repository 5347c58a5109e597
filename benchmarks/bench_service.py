"""tf.data service on this machine (issue 11): a heavy online pipeline (deblur's PNG decode and
crop, per element, in TensorFlow ops) in this process against the same pipeline on a
`tfperf.service.local` dispatcher with 1 and with 2 worker processes; the service's own cost
per element (one cached batch served forever, through the service vs here); the deblur model
trained on each, beside its compute limit, and the doctor's worker estimate (its scale_out
rule, called on the measured rates) against what the workers gave. All interleaved
(tfperf.measure.side_by_side, A B C A B C ...); medians and paired ratios. Then, on paper:
the workers each built-in workload's online pipeline would need to feed an accelerator.
Prints a markdown section.

    python benchmarks/bench_service.py [--quick] [--repeats N]

Both services run while every variant is timed (idle when not read); the workers are
processes on the same 2 cores as this one, so 2 workers cannot give twice 1 worker here.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

from common import DATA_ROOT, machine, paired, parse_args, rate, say, spread, table

from tfperf.measure import cached_batch, compare, pipeline_probe, side_by_side, training_probe

# A small deblur model (the workload's net at 8 filters, 1 block) on small patches: its
# compute limit on this CPU is above the PNG pipeline's rate, so training is input-bound.
# 32x32 crops of 320x180 frames: the decode (per frame) outweighs the model (per patch).
DEBLUR = {"patch": 32, "filters": 8, "blocks": 1}
BATCH = 16
SEED_ACCELERATORS = {  # examples/s at the compute limit, where a seed document gives one
    "regression": (129_000, "Titan X: 5000 x 128 in 11.5 s at 43% busy (Seed D)"),
    "distance_maps": (50, "GTX 1080: ~50 images/s once the maps were offline (Seed A)"),
}
TARGETS = (1_000, 10_000, 100_000)  # accelerator compute limits for the paper table (ex/s)


def write_raw_pngs(root: Path, n: int) -> list[str]:
    """deblur's raw split (one PNG pair per record) in one shard, written once."""
    import tensorflow as tf

    from tfperf.workloads import get_workload

    path = root / f"deblur_raw-{n}.tfrecord"
    if not path.exists():
        say(f"writing {n} PNG pairs to {path}")
        root.mkdir(parents=True, exist_ok=True)
        wl = get_workload("deblur", **DEBLUR)
        tmp = path.with_suffix(".tmp")
        with tf.io.TFRecordWriter(str(tmp)) as w:
            for row in wl.generate(n, seed=0):
                w.write(wl.raw_schema().encode(row))
        tmp.rename(path)
    return [str(path)]


def online_pipeline(files: list[str]) -> Any:
    """PNG records -> decode both images (per element, parallel) -> batch -> the workload's
    random crop (one patch per pair) -> prefetch; TensorFlow ops only, so it can be served."""
    import tensorflow as tf

    from tfperf.workloads import get_workload

    wl = get_workload("deblur", **DEBLUR)
    raw, shape = wl.raw_schema(), (wl.height, wl.width, 3)

    def decode(record: Any) -> dict[str, Any]:
        ex = raw.parse_one(record)
        return {k: tf.ensure_shape(tf.io.decode_png(ex[k], channels=3), shape) for k in ex}

    ds = tf.data.TFRecordDataset(files).repeat()
    ds = ds.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(BATCH, drop_remainder=True).map(wl.preprocess_batch)
    return ds.prefetch(tf.data.AUTOTUNE)


def served(ds: Any, address: str) -> Any:
    """`ds` run on the service at `address` as `pipeline.service` runs a data.pipeline
    function's dataset (parallel_epochs: each worker serves the whole, endless dataset)."""
    from tfperf.config import config_from_dict
    from tfperf.inputs.service import user_pipeline_to_service

    svc = {"address": address, "mode": "parallel_epochs", "timeout": 120}
    cfg = config_from_dict({"workload": "deblur", "pipeline": {"service": svc}})
    return user_pipeline_to_service(ds, cfg, training=True, spec="bench_service's pipeline")


def start_service(workers: int) -> Any:
    """`tfperf data-service local --workers N`'s cluster, started from here."""
    from tfperf.service.local import LocalCluster

    cluster = LocalCluster(workers, "127.0.0.1", 0, None, timeout=240)
    cluster.start()
    say(f"service with {workers} worker(s) at {cluster.address}")
    return cluster


def doctor_estimate(pipeline: float, compute: float, training: float, waiting: float) -> str:
    """What the doctor's scale_out rule says about these rates (its own code, not a copy):
    its Evidence holds the measured rates, nothing else (the rule reads no more)."""
    from tfperf.doctor.evidence.evidence import Evidence
    from tfperf.doctor.rules.model import rule_scale_out

    values = {"pipeline": pipeline, "compute": compute, "training": training}
    values |= {"input_bound_fraction": waiting, "compute_batch": float(BATCH), "budget": 0}
    values |= {"stages": [], "variants": {}, "shuffle_bytes": {}}
    missing = dataclasses.MISSING
    fields = [f for f in dataclasses.fields(Evidence) if f.default is missing]
    args = {f.name: values.get(f.name) for f in fields if f.default_factory is missing}
    findings = rule_scale_out(Evidence(**args))
    if not findings:
        return "none: no scale_out finding (the input keeps up with the model on this host)"
    m = re.search(r"on (\d+) tf\.data service worker", findings[0].change)
    return f"{m[1] if m else '?'} worker(s) ({findings[0].evidence})"


def measure_service(files: list[str], clusters: dict[int, Any], budget: dict, repeats: int):
    """Every variant, interleaved: pipelines alone, the service's overhead, training."""
    import tensorflow as tf

    from tfperf.config import config_from_dict
    from tfperf.doctor.probes.target import build_target

    local = online_pipeline(files)
    datasets = {"local": local}
    for n, cluster in clusters.items():
        datasets[f"service x{n}"] = served(online_pipeline(files), cluster.address)
    # The service's own cost: one batch served forever (against the same here), and a
    # scalar (what an element costs whatever its size).
    one = cached_batch(online_pipeline(files))
    tiny = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).repeat()
    cheap = {"cached local": one, "cached service x1": served(one, clusters[1].address)}
    cheap["scalar service x1"] = served(tiny, clusters[1].address)
    cfg = config_from_dict({"workload": "deblur", "workload_options": DEBLUR})
    run = build_target(cfg, local.element_spec, BATCH).run_steps
    steps, warmup, min_s = budget["steps"], budget["warmup"], budget["min_seconds"]
    probes = [
        pipeline_probe(f"pipe {k}", ds, batches=steps, warmup=warmup, min_seconds=min_s)
        for k, ds in (datasets | cheap).items()
    ]
    feeds = [*datasets.items(), ("compute", cached_batch(local))]
    probes += [
        training_probe(f"train {k}", run, ds, examples_per_step=BATCH, **budget) for k, ds in feeds
    ]

    def on_run(name: str, r: int) -> None:
        if name == probes[-1].name:
            say(f"repeat {r + 1}/{repeats} done")

    return side_by_side(probes, repeats=repeats, on_run=on_run)


def example_bytes(spec: Any) -> float:
    """Bytes per example of batches with element spec `spec` (leading dimension: batch)."""
    import tensorflow as tf

    total = 0.0
    for s in tf.nest.flatten(spec):
        total += math.prod(d or 1 for d in s.shape.as_list()[1:]) * s.dtype.size
    return total


def online_costs(n: int, budget: dict, repeats: int) -> dict[str, tuple[float, float, float]]:
    """{workload: (CPU-us per example, examples/s here, bytes per example)} of each built-in
    workload's tuned online pipeline (parse + preprocess of converted records: what
    `pipeline.service` would run) at its default batch, over at least `n` generated records
    (two batches), written once; interleaved repeats."""
    import tensorflow as tf

    from tfperf.config import PipelineConfig
    from tfperf.data.pipeline import make_dataset
    from tfperf.workloads import get_workload

    probes, sizes = [], {}
    for name in ("chess", "regression", "deblur", "distance_maps"):
        wl = get_workload(name)
        batch = wl.default_batch_size
        records = max(n, 2 * batch)
        path = DATA_ROOT / "service_paper" / f"{name}-{records}.tfrecord"
        if not path.exists():
            say(f"writing {records} {name} records to {path}")
            path.parent.mkdir(parents=True, exist_ok=True)
            offline = wl.offline_preprocess()
            with tf.io.TFRecordWriter(str(path)) as w:
                for i, row in enumerate(wl.generate(records, seed=0)):
                    w.write(wl.schema().encode(offline(row) if offline else row, i))
        ds = make_dataset(
            [str(path)],
            PipelineConfig(batch_size=batch, shuffle_buffer=0),
            training=True,
            parse=wl.schema().parse_batch,
            preprocess=wl.preprocess_batch,
            records=records,
        )
        sizes[name] = example_bytes(ds.element_spec)
        steps, min_s = budget["steps"], budget["min_seconds"]
        probes.append(pipeline_probe(name, ds, batches=steps, warmup=2, min_seconds=min_s))
    m = side_by_side(probes, repeats=repeats)
    out = {}
    for name, meas in m.items():
        cpu = sorted(r.cpu_seconds / r.examples for r in meas.runs)[len(meas.runs) // 2]
        out[name] = (cpu * 1e6, meas.examples_per_s.median, sizes[name])
    return out


def workers_for(target: float, per_worker: float) -> str:
    return str(max(1, math.ceil(target / per_worker)))


@dataclasses.dataclass(frozen=True)
class ServiceCost:
    """What one element costs through the service, on the client's path: `fixed` seconds
    whatever its size plus `per_byte` seconds per byte."""

    fixed: float
    per_byte: float

    def client_cap(self, batch: int, bytes_per_example: float) -> float:
        """Examples/s one trainer's client can take, in elements of `batch` examples."""
        return batch / max(1e-12, self.fixed + self.per_byte * batch * bytes_per_example)


def paper(costs: dict[str, tuple[float, float, float]], cost: ServiceCost, cores: int) -> str:
    """The model's table: workers each workload's online pipeline needs."""
    from tfperf.workloads import get_workload

    rows = []
    for name, (cpu_us, here, size) in costs.items():
        batch = get_workload(name).default_batch_size
        worker = cores / (cpu_us * 1e-6)  # a worker host of `cores` cores, CPU-bound
        cap = cost.client_cap(batch, size)
        seed = SEED_ACCELERATORS.get(name)
        at_seed = f"{workers_for(seed[0], worker)} for {rate(seed[0])}" if seed else "-"
        if seed and seed[0] > cap:
            at_seed += " (over the client cap)"
        rows.append(
            [name, batch, f"{size / 1024:,.1f}", f"{cpu_us:,.1f}", rate(here), rate(worker)]
            + [rate(cap)]
            + [workers_for(t, worker) + ("*" if t > cap else "") for t in TARGETS]
            + [at_seed]
        )
    headers = ["workload", "batch", "KiB/ex", "CPU-us/ex online", "ex/s here", "ex/s per worker"]
    headers += ["client cap ex/s"] + [f"workers @{rate(t)} ex/s" for t in TARGETS]
    note = "\n\n\\* over the client cap: one trainer process cannot take that rate."
    return table([*headers, "seed accelerator"], rows) + note


def main() -> int:
    args = parse_args(__doc__.split("\n\n")[0])
    repeats = args.repeats or (2 if args.quick else 5)
    n = 64 if args.quick else 256
    min_s = 0.5 if args.quick else 3.0
    budget = {"steps": args.batches or 8, "warmup": 2, "min_seconds": min_s}
    t0 = time.perf_counter()
    files = write_raw_pngs(DATA_ROOT / "service", n)
    clusters: dict[int, Any] = {}
    try:
        for workers in (1, 2):
            clusters[workers] = start_service(workers)
        res = measure_service(files, clusters, budget, repeats)
    finally:
        for cluster in clusters.values():
            cluster.stop()
    costs = online_costs(n, budget, max(2, repeats - 2))
    heavy = example_bytes(online_pipeline(files).element_spec)
    took = time.perf_counter() - t0
    head = (
        f"{machine()}. deblur's raw PNG pairs (320x180, {n} records, repeated) decoded per "
        f"element and cropped to {DEBLUR['patch']}x{DEBLUR['patch']} in TensorFlow ops, batch "
        f"{BATCH}; the services are `tfperf.service.local` clusters (a dispatcher and worker "
        f"processes on this host), parallel_epochs; medians of {repeats} interleaved repeats, "
        f"ratios are medians of per-repeat pairs with their range ({took:.0f} s).\n"
    )
    cost = service_cost(res, BATCH * heavy)
    print("## tf.data service: a heavy online pipeline local vs on 1 and 2 workers\n")
    print(head)
    print(pipelines_table(res))
    print(cost_text(cost, BATCH * heavy))
    print(training_table(res))
    print(doctor_text(res))
    print(paper_text(res, costs, cost))
    return 0


def ex(res: dict[str, Any], key: str) -> float:
    return res[key].examples_per_s.median


def median_wait(m: Any) -> float:
    """Median share of a training measurement's time spent waiting for input."""
    runs = [r for r in m.runs if r.seconds > 0]
    return sorted(r.wait_seconds / r.seconds for r in runs)[len(runs) // 2] if runs else 0.0


def pipelines_table(res: dict[str, Any]) -> str:
    rows = [["local (this process)", spread(res["pipe local"].examples_per_s), "1.00x"]]
    for w in (1, 2):
        m = res[f"pipe service x{w}"]
        c = compare(res["pipe local"], m)
        rows.append([f"service, {w} worker(s)", spread(m.examples_per_s), paired(c)])
    return table(["pipeline alone", "ex/s", "vs local"], rows)


def service_cost(res: dict[str, Any], element_bytes: float) -> ServiceCost:
    """The per-element model from the scalar and the cached batch through the service (the
    cached batch here costs next to nothing, subtracted all the same)."""
    fixed = 1 / res["pipe scalar service x1"].batches_per_s.median
    batch = 1 / res["pipe cached service x1"].batches_per_s.median
    batch -= 1 / res["pipe cached local"].batches_per_s.median
    return ServiceCost(fixed, max(0.0, batch - fixed) / element_bytes)


def cost_text(cost: ServiceCost, element_bytes: float) -> str:
    mib = element_bytes / 2**20
    whole = cost.fixed + cost.per_byte * element_bytes
    return (
        f"\nThe service's own cost per element, on one trainer's client: {cost.fixed * 1e6:,.0f} "
        f"us for a scalar element, {whole * 1e6:,.0f} us for one of the batches above "
        f"({mib:.2f} MiB, served from a cache against the same cache here): "
        f"{cost.per_byte * 2**20 * 1e3:,.1f} ms per MiB on top of the fixed cost, so one client "
        f"takes at most ~{rate(1 / whole)} such batches/s ({rate(BATCH / whole)} ex/s).\n"
    )


def training_table(res: dict[str, Any]) -> str:
    limit, rows = res["train compute"], []
    variants = (("local", "local input"), ("service x1", "1 worker"), ("service x2", "2 workers"))
    for key, what in variants:
        m = res[f"train {key}"]
        share = paired(compare(limit, m), pct=True)
        rows.append([f"training, {what}", spread(m.examples_per_s), f"{median_wait(m):.0%}", share])
    rows.append(["compute limit (one cached batch)", spread(limit.examples_per_s), "-", "100%"])
    model = f"deblur model ({DEBLUR['filters']} filters, {DEBLUR['blocks']} block)"
    return table([model, "ex/s", "input wait", "of limit"], rows)


def doctor_text(res: dict[str, Any]) -> str:
    wait = median_wait(res["train local"])
    rates = [ex(res, k) for k in ("pipe local", "train compute", "train local")]
    said = doctor_estimate(*rates, wait)
    return (
        "\nThe doctor's estimate (its scale_out rule on the medians above: pipeline alone, "
        f"compute limit, training with local input, {wait:.0%} input wait): {said}. Measured: "
        f"1 worker fed training at {rate(ex(res, 'train service x1'))} ex/s, 2 workers at "
        f"{rate(ex(res, 'train service x2'))} ex/s, against a compute limit of "
        f"{rate(ex(res, 'train compute'))} ex/s. The doctor counts workers on other hosts; "
        "here they share this host's cores with the model, so they give less.\n"
    )


def paper_text(res: dict[str, Any], costs: dict, cost: ServiceCost) -> str:
    import os

    cores = os.cpu_count() or 1
    model = (
        "On paper: each workload's online pipeline as tfperf runs it after `convert` (parse "
        "and preprocess; c = CPU time of this process per example, all threads) on workers of "
        f"{cores} cores like this host. A worker gives r = cores / c examples/s. One trainer's "
        "client takes at most batch / (f + batch x bytes per example x m) examples/s (f, m: "
        "the service's fixed and per-byte cost per element above). An accelerator at R "
        "examples/s needs ceil(R / r) workers while R is under that client cap (above it: "
        "several trainer processes, or smaller elements).\n"
    )
    deblur = costs.get("deblur", (1.0, 0.0, 0.0))[0]
    seeds = "; ".join(f"{k}: {v[1]}" for k, v in SEED_ACCELERATORS.items())
    tail = (
        f"\nSeeds' accelerators: {seeds}. The deblur row is its tuned pipeline (PNGs decoded "
        f"once by convert, the crop online: r = {rate(cores / (deblur * 1e-6))} ex/s); with "
        f"the PNG decode online, as measured above, one worker of this host gave "
        f"{rate(ex(res, 'pipe service x1'))} ex/s."
    )
    return model + "\n" + paper(costs, cost, cores) + "\n" + tail


if __name__ == "__main__":
    sys.exit(main())
