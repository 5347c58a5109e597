"""`tfperf doctor --fix` where the model sets the pace: the built-in workloads' models and
two user-style Keras models (a small CNN on images from memory, a tabular model with
embeddings), each with a pipeline that is not its bottleneck. Per case: the verdict, the
measured compute findings, each --fix trial with its predicted and measured (paired)
gain, training examples/s before and after --fix (the fix's final paired check), and the
doctor's wall time against its budget. Prints one markdown section.

    python benchmarks/bench_doctor_compute.py [--quick] [--cases a,b] [--budget S]

Each case is one `tfperf doctor RUNFILE --fix --json` process (its wall time is the
doctor's, start-up included). Targets on this CPU: a measured compute finding for every
case that is not input-bound, --fix never slower than before, the doctor within its
budget + 10%. Precision and batch size change the results and are not applied (no
--allow); the report lists them as withheld.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from common import machine, say, table

BUDGET = 150.0  # seconds per --fix, the diagnosis included
QUICK_BUDGET = 60.0

USER_CODE = """
import keras
import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 255, size=(2048, 32, 32, 3), dtype=np.uint8)
CLASSES = RNG.integers(0, 10, size=2048)
CITY = RNG.integers(0, 500, size=8192)
SHOP = RNG.integers(0, 2000, size=8192)
NUMERIC = RNG.normal(size=(8192, 12)).astype("float32")
TARGET = RNG.normal(size=8192).astype("float32")


def images(training=True, batch_size=64):
    ds = tf.data.Dataset.from_tensor_slices((IMAGES, CLASSES)).shuffle(2048).repeat()
    ds = ds.batch(batch_size).map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y))
    return ds.prefetch(tf.data.AUTOTUNE)


def cnn():
    x = keras.Input((32, 32, 3))
    h = keras.layers.Conv2D(32, 3, activation="relu")(x)
    h = keras.layers.Conv2D(32, 3, activation="relu")(h)
    h = keras.layers.MaxPooling2D()(h)
    h = keras.layers.Conv2D(64, 3, activation="relu")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(x, keras.layers.Dense(10)(h))


def rows(training=True, batch_size=256):
    features = {"city": CITY, "shop": SHOP, "numeric": NUMERIC}
    ds = tf.data.Dataset.from_tensor_slices((features, TARGET)).shuffle(8192).repeat()
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def tabular():
    city = keras.Input((), dtype="int64", name="city")
    shop = keras.Input((), dtype="int64", name="shop")
    numeric = keras.Input((12,), name="numeric")
    parts = [
        keras.layers.Embedding(500, 16)(city),
        keras.layers.Embedding(2000, 32)(shop),
        numeric,
    ]
    h = keras.layers.Dense(1024, activation="relu")(keras.layers.Concatenate()(parts))
    h = keras.layers.Dense(1024, activation="relu")(h)
    return keras.Model({"city": city, "shop": shop, "numeric": numeric}, keras.layers.Dense(1)(h))
"""

SPARSE_LOGITS = "sparse_categorical_crossentropy_from_logits"
# name -> the run file (paths relative to the case folder)
CASES: dict[str, dict[str, Any]] = {
    "regression": {"workload": "regression"},
    "regression steps_per_loop=1": {"workload": "regression", "train": {"steps_per_loop": 1}},
    "chess": {"workload": "chess"},
    "user CNN (images from memory)": {
        "data": {"pipeline": "compute_models:images"},
        "model": {
            "name": "compute_models:cnn",
            "loss": "sparse_categorical_crossentropy_from_logits",
        },
        "pipeline": {"batch_size": 64},
    },
    "user tabular (embeddings)": {
        "data": {"pipeline": "compute_models:rows"},
        "model": {"name": "compute_models:tabular", "loss": "mse"},
        "pipeline": {"batch_size": 256},
    },
}
QUICK = ("regression steps_per_loop=1", "user tabular (embeddings)")


def run_case(
    name: str, doc: dict[str, Any], folder: Path, budget: float, allow: str | None
) -> dict[str, Any]:
    """One `tfperf doctor --fix --json` process on the case's run file."""
    runfile = folder / f"case{list(CASES).index(name)}.yaml"
    doc = {**doc, "train": {**doc.get("train", {}), "out_dir": str(folder / "out" / runfile.stem)}}
    runfile.write_text(yaml.safe_dump(doc))
    cmd = [sys.executable, "-m", "tfperf.cli.main", "doctor", str(runfile), "--fix"]
    cmd += ["--budget", str(budget), "--json"] + (["--allow", allow] if allow else [])
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=folder)
    wall = time.monotonic() - t0
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1], "wall": wall}
    return {**json.loads(out.stdout), "wall": wall}


def rows_of(name: str, res: dict[str, Any], budget: float) -> tuple[list[str], list[list[str]]]:
    """(the case's summary row, its trial rows)."""
    if "error" in res:
        return [name, "error", res["error"][:80], "", "", "", f"{res['wall']:.0f}"], []
    diag, fix = res["diagnosis"], res["fix"] or {}
    compute = [f["code"] for f in diag["findings"] if f["kind"] == "compute"]
    before, after = fix.get("before_examples_per_s", 0.0), fix.get("after_examples_per_s", 0.0)
    check = fix.get("check") or {}
    kept = list(fix.get("run_file_changes") or {}) + list(fix.get("pipeline_changes") or [])
    ratio = f"{fix['speedup']:.2f}x" if kept else "1.00x (nothing kept)"
    if kept and check.get("low") is not None:
        ratio += f" (paired {check['low']:.2f}-{check['high']:.2f})"
    over = res["wall"] / budget
    summary = [
        name,
        diag["verdict"],
        ", ".join(compute) or "-",
        f"{before:,.0f}",
        f"{after:,.0f}",
        ratio,
        f"{res['wall']:.0f} / {budget:.0f} s ({over:.0%})",
    ]
    trials = []
    for t in fix.get("trials", []):
        predicted = f"~{t['predicted']:.2f}x" if t.get("predicted") else "-"
        measured = f"{t['ratio']:.2f}x" if t.get("ratio") else "-"
        trials.append([name, t["name"], predicted, measured, "yes" if t["kept"] else "no"])
    for line in fix.get("withheld", []):
        trials.append([name, line.split(":", 1)[0] + " (withheld)", "-", "-", "no"])
    return summary, trials


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}, budget 60 s")
    p.add_argument("--cases", default=None, help="comma-separated case names")
    p.add_argument("--budget", type=float, default=None, help="seconds per --fix")
    p.add_argument("--allow", default=None, help="passed to --allow (e.g. precision,batch)")
    args = p.parse_args()
    budget = args.budget or (QUICK_BUDGET if args.quick else BUDGET)
    chosen = args.cases.split(",") if args.cases else list(QUICK if args.quick else CASES)
    folder = Path(tempfile.mkdtemp(prefix="bench_compute_"))
    (folder / "compute_models.py").write_text(USER_CODE)
    summaries, trials = [], []
    for name in chosen:
        say(f"{name}: tfperf doctor --fix --budget {budget:.0f}")
        s, t = rows_of(name, run_case(name, CASES[name], folder, budget, args.allow), budget)
        summaries.append(s)
        trials += t
    print("## doctor --fix where the model sets the pace (bench_doctor_compute.py)\n")
    print(machine())
    cmd = "python benchmarks/bench_doctor_compute.py" + (" --quick" if args.quick else "")
    cmd += f" --budget {budget:.0f}" + (f" --allow {args.allow}" if args.allow else "")
    print(f"\n`{cmd}` (each case one `tfperf doctor RUNFILE --fix --budget {budget:.0f}`)\n")
    head = ["case", "verdict", "compute findings", "before ex/s", "after ex/s", "--fix", "wall"]
    print(table(head, summaries))
    print()
    print(table(["case", "trial", "predicted", "measured (paired)", "kept"], trials))


if __name__ == "__main__":
    main()
