"""`tfperf doctor --fix` on each workload's original pipeline, against the workload's
hand-tuned pipeline, measured side by side (A B A B) with the same train step: the fixed
pipeline should reach >= 90% of the hand-tuned examples/s. Prints one markdown section.

    python benchmarks/bench_doctor.py [--quick] [--repeats N]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from common import DATA_ROOT, machine, parse_args, rate, table

TARGET = 0.90  # fixed / hand-tuned examples/s
WORKLOADS = {"chess": 4000, "regression": 8000, "distance_maps": 1000, "deblur": 256}


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    args = parse_args(__doc__.split("\n\n")[0])
    from tfperf.config import config_from_dict, load_config
    from tfperf.doctor.diagnosis.diagnose import diagnose
    from tfperf.doctor.fix.entry import fix_pipeline
    from tfperf.doctor.probes.target import build_target, train_probe
    from tfperf.inputs.datasets import ensure_workload_data, make_input_dataset
    from tfperf.measure import compare, repeat_if_finite, side_by_side

    repeats = args.repeats or (2 if args.quick else 5)
    doctor = {
        "steps": 5 if args.quick else 10,
        "warmup": 3,
        "repeats": 2 if args.quick else 3,
        "min_seconds": 0.1 if args.quick else 0.4,
        "what_ifs": [],
    }
    rows, notes = [], []
    for name, examples in WORKLOADS.items():
        n = examples // 4 if args.quick else examples
        from tfperf.workloads import get_workload

        batch = get_workload(name).default_batch_size  # the workload's own batch
        base = {
            "workload": name,
            "data": {"dir": str(DATA_ROOT / "doctor" / name), "examples": n, "eval_examples": 64},
            "pipeline": {"batch_size": batch},
            "doctor": doctor,
        }
        original = config_from_dict({**base, "data": {**base["data"], "variant": "original"}})
        tuned = config_from_dict(base)
        say(f"{name}: data")
        ensure_workload_data(original, progress=False)
        t0 = time.perf_counter()
        diag = diagnose(original)
        with tempfile.TemporaryDirectory() as tmp:
            result = fix_pipeline(original, diag, out=Path(tmp) / f"{name}.optimized.yaml")
            # nothing kept: nothing written, the original is what --fix leaves
            fixed = load_config(result.written[-1]) if result.written else original
        say(
            f"{name}: doctor --fix {time.perf_counter() - t0:.0f} s, kept {result.run_file_changes}"
        )
        # Side by side, interleaved, same train step: original, fixed, hand-tuned.
        probes = []
        for label, cfg in (("original", original), ("fixed", fixed), ("tuned", tuned)):
            ds = repeat_if_finite(make_input_dataset(cfg, training=True))
            target = build_target(cfg, ds.element_spec, cfg.pipeline.batch_size)
            probes.append(train_probe(label, target, ds, cfg.doctor))
        runs = side_by_side(probes, repeats=repeats)
        med = {k: m.examples_per_s.median for k, m in runs.items()}
        ratio = compare(runs["tuned"], runs["fixed"]).ratio  # fixed / tuned, paired
        first = diag.findings[0].code if diag.findings else "-"
        changes = ", ".join(f"{k}: {v}" for k, v in result.run_file_changes.items()) or "none"
        rows.append(
            [
                name,
                batch,
                f"{diag.verdict} ({diag.input_bound_fraction:.0%})",
                first,
                changes,
                rate(med["original"]),
                rate(med["fixed"]),
                rate(med["tuned"]),
                f"{ratio:.0%}",
                "yes" if ratio >= TARGET else "**no**",
            ]
        )
        if ratio < TARGET:
            notes.append(f"- {name}: fixed {ratio:.0%} of hand-tuned.")
    print("## doctor --fix vs the hand-tuned pipelines\n")
    print(
        f"{machine()}. Training examples/s (tfperf's train step, medians of {repeats} "
        "interleaved runs); the doctor ran on each workload's original pipeline with "
        "compute what-ifs off, so only pipeline changes are compared. Target: fixed >= "
        f"{TARGET:.0%} of hand-tuned.\n"
    )
    print(
        table(
            [
                "workload",
                "batch",
                "original verdict",
                "first finding",
                "--fix kept",
                "original ex/s",
                "fixed ex/s",
                "hand-tuned ex/s",
                "fixed/tuned",
                "target",
            ],
            rows,
        )
    )
    if notes:
        print("\n" + "\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
