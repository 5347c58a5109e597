"""The doctor on input pipelines ported from public code (tests/doctor/public_pipelines/,
loaded by path), issue 19 section 4: per pipeline, `tfperf.optimize` on the published
pipeline alone (model=None, as a fast accelerator would see it) and with its model; then
the published, the fixed and the hand-tuned pipelines timed side by side (tfperf.measure:
interleaved repeats, medians, paired ratios), alone and feeding the model's Keras train
step. Prints one markdown section for BENCHMARKS.md.

    python benchmarks/bench_doctor_public.py [--quick] [--repeats N] [--budget S]
        [--cases a,b,...] [--size small|full] [--alone-only] [--hogs N]

--size full writes each case's data at its original's size (the case's FULL examples,
once, under DATA_ROOT/doctor_public/full; a progress line per case says how long it took
and how many MB it holds) instead of the tests' small stand-ins. --alone-only runs only
`tfperf.optimize(ds, None, budget_s)` on the pipeline alone (no model), as a fast
accelerator would see it. --hogs N starts N busy Python processes (`while True: pass`)
for the whole run and kills them at the end: a host with other work running.

The figure is the gain captured: log(fixed/original) / log(tuned/original) (paired ratios,
pipeline alone), on the cases whose twin gains at least 1.3x; the summary line also gives
the worst fixed/original, the errors and the optimize runs over budget + 10%.

The full run (every case, --size full --budget 120 --hogs 2) takes hours: run it when the
machine is otherwise idle, under the shared lock (flock /tmp/tfperf-bench.lock ...). A
smoke run that proves the script works (two pipelines, a small budget):

    python benchmarks/bench_doctor_public.py --quick --budget 10 \
        --cases tfrecord_features,ridership_mulvar

Each case runs in a child process (`--child NAME`: one JSON line), killed beyond its time
limit, so one pipeline that hangs or fills memory is a row that says so.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import DATA_ROOT, REPO, machine, parse_args, say, start_hogs, stop_hogs, table

PACKAGE = REPO / "tests" / "doctor" / "public_pipelines"
DEFAULT_BUDGET = 120.0  # seconds per optimize call (issue 19's runs)
QUICK = ("tfrecord_features", "ridership_mulvar")
GAIN_FLOOR = 1.3  # the twin's gain from which a case counts in the gain captured
DATA = DATA_ROOT / "doctor_public"


def load_cases() -> Any:
    """tests/doctor/public_pipelines as the package `public_pipelines` (by path: its
    modules import each other relatively)."""
    if "public_pipelines.cases" in sys.modules:
        return sys.modules["public_pipelines.cases"]
    spec = importlib.util.spec_from_file_location(
        "public_pipelines", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["public_pipelines"] = package
    spec.loader.exec_module(package)
    return importlib.import_module("public_pipelines.cases")


def _pop(argv: list[str], flag: str) -> str | None:
    """Removes `flag VALUE` from argv (options parse_args does not know); its value."""
    if flag not in argv:
        return None
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i : i + 2]
    return value


# ---- one case, in a child process ---------------------------------------------------------
def first_finding(diagnosis: dict[str, Any]) -> str | None:
    """The first finding about speed, RAM or data (what a resume loses is not a flaw)."""
    found = next((f for f in diagnosis["findings"] if f["kind"] != "resume"), None)
    return None if found is None else found["code"]


def keras_steps(model: Any, batch: Any) -> Any:
    """A tfperf.measure StepRunner: `n` steps of the model's own Keras train function
    (what model.fit runs), built by one train_on_batch on a real batch."""
    x, y = batch[0], batch[1]
    model.train_on_batch(x, y)
    train_function = model.make_train_function()

    def run(iterator: Any, n: int) -> float:
        for _ in range(n):
            logs = train_function(iterator)
        float(next(iter(logs.values())))  # waits for the steps
        return 0.0

    return run


def optimize_row(case: Any, folder: str, budget: float, with_model: bool) -> dict[str, Any]:
    import tfperf

    ds = case.original(folder, batch_size=case.batch_size)
    model = case.model() if with_model else None
    row: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        fixed, report = tfperf.optimize(ds, model, budget_s=budget)
    except Exception as exc:  # the row says why; the benchmark goes on
        row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        row["doctor_s"] = time.perf_counter() - t0
        return row
    row["doctor_s"] = time.perf_counter() - t0
    out = report.to_dict()
    row["first"] = first_finding(out["diagnosis"])
    row["verdict"] = out["diagnosis"].get("verdict")
    row["kept"] = report.kept
    row["fixed"] = fixed
    return row


def run_case(
    name: str, quick: bool, repeats: int, budget: float, size: str, alone_only: bool
) -> dict[str, Any]:
    from tfperf.measure import compare, pipeline_probe, side_by_side, training_probe

    cases = load_cases()
    case = cases.BY_NAME[name]
    folder = cases.make(case, DATA, size)
    b = case.batch_size
    result: dict[str, Any] = {"case": name, "size": size}
    steps = {"batches": 10 if quick else 50, "warmup": 3 if quick else 10}
    for mode in ("alone",) if alone_only else ("alone", "model"):
        say(f"{name}: optimize, {mode} (budget {budget:.0f} s)")
        row = optimize_row(case, folder, budget, with_model=mode == "model")
        fixed = row.pop("fixed", None)
        variants = {"original": case.original(folder, batch_size=b)}
        if fixed is not None and row.get("kept"):
            variants["fixed"] = fixed
        variants["tuned"] = case.tuned(folder, batch_size=b)
        if mode == "alone":
            probes = [pipeline_probe(k, ds, **steps, min_seconds=0.2) for k, ds in variants.items()]
        else:
            probes = []
            for k, ds in variants.items():
                runner = keras_steps(case.model(), next(iter(ds)))
                n, warm = max(2, steps["batches"] // 5), steps["warmup"]
                probes.append(
                    training_probe(k, runner, ds, steps=n, warmup=warm, examples_per_step=b)
                )
        say(f"{name}: timing {', '.join(variants)} side by side ({mode})")
        try:
            runs = side_by_side(probes, repeats=repeats)
        except Exception as exc:
            row["timing_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
            result[mode] = row
            continue
        rates = {k: m.examples_per_s.median for k, m in runs.items()}
        if "fixed" not in rates:  # nothing kept: optimize returned the original
            rates["fixed"] = rates["original"]
            runs["fixed"] = runs["original"]
        row["rates"] = rates
        row["fixed_vs_original"] = compare(runs["original"], runs["fixed"]).ratio
        row["fixed_vs_tuned"] = compare(runs["tuned"], runs["fixed"]).ratio
        row["tuned_vs_original"] = compare(runs["original"], runs["tuned"]).ratio
        result[mode] = row
        print(json.dumps(result), flush=True)  # the parent keeps this if later work is killed
    return result


def write_data(cases: Any, name: str, size: str) -> dict[str, Any]:
    """The case's data at `size`, written now if missing (outside the child's time limit),
    with a progress line: how long the writing took and how many MB the folder holds."""
    case = cases.BY_NAME[name]
    folder = Path(DATA / "full" / name if size == "full" else DATA / name)
    fresh = not (folder / ".done").exists()
    if fresh:
        what = f" ({case.FULL:,} examples, its original's size)" if size == "full" else ""
        say(f"{name}: writing {size}-size data{what} ...")
    t0 = time.perf_counter()
    cases.make(case, DATA, size)
    seconds = time.perf_counter() - t0
    mb = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6
    if fresh:
        say(f"{name}: {size}-size data written in {seconds:.0f} s, {mb:,.0f} MB")
    return {"data_mb": mb, "write_s": seconds if fresh else None}


def guarded_child(
    name: str, quick: bool, repeats: int, budget: float, size: str, alone_only: bool
) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", name, "--repeats", str(repeats)]
    cmd += ["--budget", str(budget), "--size", size] + (["--quick"] if quick else [])
    cmd += ["--alone-only"] if alone_only else []
    runs = 1 if alone_only else 2
    limit = runs * budget * 1.1 + 600  # the optimize calls, start-up and the timing after
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=limit)
        out, code = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:  # run() killed the child it started
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        code = f"killed after {limit:.0f} s"
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    row = json.loads(lines[-1]) if lines else {"case": name}
    if code != 0:
        row["failed"] = f"exit {code}"
    return row


# ---- the report ----------------------------------------------------------------------------
def _x(v: float | None, fmt: str = "{:.2f}x") -> str:
    return "-" if v is None else fmt.format(v)


def _rate(row: dict[str, Any], key: str) -> str:
    rates = row.get("rates") or {}
    return f"{rates[key]:,.0f}" if key in rates else "-"


def gain_captured(row: dict[str, Any]) -> float | None:
    """log(fixed/original) / log(tuned/original), when the twin gains >= GAIN_FLOOR."""
    tuned, fixed = row.get("tuned_vs_original"), row.get("fixed_vs_original")
    if not tuned or not fixed or tuned < GAIN_FLOOR:
        return None
    return math.log(fixed) / math.log(tuned)


def report(
    rows: list[dict[str, Any]], cases: Any, repeats: int, budget: float, opts: dict[str, Any]
) -> None:
    size, hogs = opts["size"], opts["hogs"]
    print("## doctor on public pipelines\n")
    print(
        f"{machine()}; data at size {size}"
        + (f", {hogs} CPU hogs running" if hogs else "")
        + ". Each pipeline of tests/doctor/public_pipelines/ (ported from public code, "
        "stand-in data written locally) through `tfperf.optimize(ds, model, budget_s="
        f"{budget:.0f})`, first without a model (the pipeline alone, as a fast accelerator "
        "sees it)"
        + ("" if opts["alone_only"] else ", then with the case's model")
        + "; then the published (orig), the fixed and the hand-tuned pipelines side by side "
        "(tfperf.measure: the pipeline alone, or feeding the model's Keras train function; "
        f"medians of {repeats} interleaved repeats, examples/s; ratios are medians of paired "
        "ratios). When optimize kept nothing the fixed pipeline is the original (1.00x). "
        "doctor s: optimize's wall time (within budget + 10%: ok, else OVER); first: the "
        "diagnosis' first finding; captured: log(fixed/orig) / log(tuned/orig), where the "
        f"twin gains >= {GAIN_FLOOR}x.\n"
    )
    headers = ["pipeline", "mode", "first finding", "kept", "doctor s", "orig", "fixed"]
    headers += ["tuned", "fixed/orig", "tuned/orig", "captured"]
    out, captured, worst, over, errors = [], [], [], 0, 0
    for r in rows:
        for mode in ("alone",) if opts["alone_only"] else ("alone", "model"):
            row = r.get(mode)
            if row is None:
                errors += 1
                out.append([r["case"], mode, r.get("failed", "not run")] + ["-"] * 8)
                continue
            errors += "error" in row or "timing_error" in row
            first = row.get("error") or row.get("timing_error") or row.get("first") or "none"
            late = row.get("doctor_s", 0) > budget * 1.1
            over += late
            gain = gain_captured(row)
            if mode == "alone":
                if gain is not None:
                    captured.append(gain)
                if row.get("fixed_vs_original"):
                    worst.append(row["fixed_vs_original"])
            doctor_s = row.get("doctor_s")
            out.append(
                [
                    r["case"],
                    mode,
                    first,
                    ", ".join(row.get("kept") or []) or "nothing",
                    "-" if doctor_s is None else f"{doctor_s:.0f} ({'OVER' if late else 'ok'})",
                    _rate(row, "original"),
                    _rate(row, "fixed"),
                    _rate(row, "tuned"),
                    _x(row.get("fixed_vs_original")),
                    _x(row.get("tuned_vs_original")),
                    _x(gain, "{:.0%}"),
                ]
            )
    print(table(headers, out))
    med = f"{statistics.median(captured):.0%}" if captured else "-"
    low = f"{min(worst):.2f}x" if worst else "-"
    print(
        f"\nPipeline alone: median gain captured {med} over {len(captured)} pipelines whose "
        f"twin gains >= {GAIN_FLOOR}x (target >= 60%); worst fixed/original {low} (target >= "
        f"0.97x); errors {errors} (target 0); optimize runs over budget + 10%: {over} "
        "(target 0)."
    )
    data = [r for r in rows if r.get("data_mb") is not None]
    if data:
        sizes = "; ".join(f"{r['case']}: {r['data_mb']:,.0f} MB" for r in data)
        print(f"\nData ({size}): {sizes}.")
    sources = {r["case"]: cases.BY_NAME[r["case"]].SOURCE for r in rows}
    print("\nSources: " + "; ".join(f"{k}: {v}" for k, v in sources.items()) + ".")


def main() -> int:
    argv = sys.argv[1:]
    child, chosen = _pop(argv, "--child"), _pop(argv, "--cases")
    budget_arg = _pop(argv, "--budget")
    size = _pop(argv, "--size") or "small"
    hogs = int(_pop(argv, "--hogs") or 0)
    alone_only = "--alone-only" in argv
    argv = [a for a in argv if a != "--alone-only"]
    if size not in ("small", "full"):
        sys.exit(f"--size {size}: small or full")
    args = parse_args(__doc__.split("\n\n")[0], argv)
    repeats = args.repeats or (2 if args.quick else 5)
    budget = float(budget_arg) if budget_arg else (10.0 if args.quick else DEFAULT_BUDGET)
    if child:
        result = run_case(child, args.quick, repeats, budget, size, alone_only)
        print(json.dumps(result), flush=True)
        return 0
    cases = load_cases()
    names = chosen.split(",") if chosen else (list(QUICK) if args.quick else cases.NAMES)
    unknown = [n for n in names if n not in cases.BY_NAME]
    if unknown:
        sys.exit(f"unknown cases {unknown}; known: {sorted(cases.BY_NAME)}")
    rows = []
    hog_procs = start_hogs(hogs)
    try:
        for name in names:  # one at a time: two benchmarks at once would share the cores
            say(f"== {name}")
            try:
                data = write_data(cases, name, size)
            except Exception as exc:  # the row says why; the benchmark goes on
                rows.append({"case": name, "failed": f"data: {type(exc).__name__}: {exc}"})
                continue
            rows.append({**guarded_child(name, args.quick, repeats, budget, size, alone_only)})
            rows[-1].update(data)
            say(json.dumps(rows[-1]))
    finally:
        stop_hogs(hog_procs)
    opts = {"size": size, "hogs": hogs, "alone_only": alone_only}
    report(rows, cases, repeats, budget, opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
