"""The doctor on input pipelines ported from public code (tests/doctor/public_pipelines/,
loaded by path), issue 19 section 4: per pipeline, `tfperf.optimize` on the published
pipeline alone (model=None, as a fast accelerator would see it) and with its model; then
the published, the fixed and the hand-tuned pipelines timed side by side (tfperf.measure:
interleaved repeats, medians, paired ratios), alone and feeding the model's Keras train
step. Prints one markdown section for BENCHMARKS.md.

    python benchmarks/bench_doctor_public.py [--quick] [--repeats N] [--budget S]
        [--cases a,b,...]

The full run (every case, --budget 120) takes a long while: run it on a quiet machine.
A smoke run that proves the script works (two pipelines, a small budget):

    python benchmarks/bench_doctor_public.py --quick --budget 10 \
        --cases tfrecord_features,ridership_mulvar

Each case runs in a child process (`--child NAME`: one JSON line), killed beyond its time
limit, so one pipeline that hangs or fills memory is a row that says so.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from common import DATA_ROOT, REPO, machine, parse_args, say, table

PACKAGE = REPO / "tests" / "doctor" / "public_pipelines"
DEFAULT_BUDGET = 120.0  # seconds per optimize call (issue 19's runs)
QUICK = ("tfrecord_features", "ridership_mulvar")


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


def run_case(name: str, quick: bool, repeats: int, budget: float) -> dict[str, Any]:
    from tfperf.measure import compare, pipeline_probe, side_by_side, training_probe

    cases = load_cases()
    case = cases.BY_NAME[name]
    folder = cases.make(case, DATA_ROOT / "doctor_public")
    b = case.batch_size
    result: dict[str, Any] = {"case": name}
    steps = {"batches": 10 if quick else 50, "warmup": 3 if quick else 10}
    for mode in ("alone", "model"):
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


def guarded_child(name: str, quick: bool, repeats: int, budget: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", name, "--repeats", str(repeats)]
    cmd += ["--budget", str(budget)] + (["--quick"] if quick else [])
    limit = 2 * budget * 1.1 + 600  # two optimize calls, start-up and the timing after
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


def report(rows: list[dict[str, Any]], cases: Any, repeats: int, budget: float) -> None:
    print("## doctor on public pipelines\n")
    print(
        f"{machine()}. Each pipeline of tests/doctor/public_pipelines/ (ported from public "
        "code, stand-in data) through `tfperf.optimize(ds, model, budget_s="
        f"{budget:.0f})`, first without a model (the pipeline alone, as a fast accelerator "
        "sees it), then with the case's model; then the published (orig), the fixed and the "
        "hand-tuned pipelines side by side (tfperf.measure: the pipeline alone, or feeding "
        f"the model's Keras train function; medians of {repeats} interleaved repeats, "
        "examples/s; ratios are medians of paired ratios). When optimize kept nothing the "
        "fixed pipeline is the original (1.00x). doctor s: optimize's wall time (budget + "
        "10% is the target); first: the diagnosis' first finding.\n"
    )
    headers = ["pipeline", "mode", "first finding", "kept", "doctor s", "orig", "fixed"]
    headers += ["tuned", "fixed/orig", "tuned/orig", "fixed/tuned"]
    out, of_tuned, over, errors = [], [], 0, 0
    for r in rows:
        for mode in ("alone", "model"):
            row = r.get(mode)
            if row is None:
                out.append([r["case"], mode, r.get("failed", "not run")] + ["-"] * 8)
                continue
            errors += "error" in row
            first = row.get("error") or row.get("first") or "none"
            over += row.get("doctor_s", 0) > budget * 1.1
            if mode == "alone" and row.get("fixed_vs_tuned"):
                of_tuned.append(row["fixed_vs_tuned"])
            out.append(
                [
                    r["case"],
                    mode,
                    first,
                    ", ".join(row.get("kept") or []) or "nothing",
                    _x(row.get("doctor_s"), "{:.0f}"),
                    _rate(row, "original"),
                    _rate(row, "fixed"),
                    _rate(row, "tuned"),
                    _x(row.get("fixed_vs_original")),
                    _x(row.get("tuned_vs_original")),
                    _x(row.get("fixed_vs_tuned"), "{:.0%}"),
                ]
            )
    print(table(headers, out))
    med = f"{statistics.median(of_tuned):.0%}" if of_tuned else "-"
    print(
        f"\nPipeline alone: median fixed/tuned {med} over {len(of_tuned)} pipelines (target "
        f">= 70%); optimize runs over budget + 10%: {over}; optimize errors (refused "
        f"pipelines): {errors}."
    )
    sources = {r["case"]: cases.BY_NAME[r["case"]].SOURCE for r in rows}
    print("\nSources: " + "; ".join(f"{k}: {v}" for k, v in sources.items()) + ".")


def main() -> int:
    argv = sys.argv[1:]
    child, chosen = _pop(argv, "--child"), _pop(argv, "--cases")
    budget_arg = _pop(argv, "--budget")
    args = parse_args(__doc__.split("\n\n")[0], argv)
    repeats = args.repeats or (2 if args.quick else 5)
    budget = float(budget_arg) if budget_arg else (10.0 if args.quick else DEFAULT_BUDGET)
    if child:
        print(json.dumps(run_case(child, args.quick, repeats, budget)), flush=True)
        return 0
    cases = load_cases()
    names = chosen.split(",") if chosen else (list(QUICK) if args.quick else cases.NAMES)
    unknown = [n for n in names if n not in cases.BY_NAME]
    if unknown:
        sys.exit(f"unknown cases {unknown}; known: {sorted(cases.BY_NAME)}")
    rows = []
    for name in names:  # one at a time: two benchmarks at once would share the cores
        say(f"== {name}")
        rows.append(guarded_child(name, args.quick, repeats, budget))
        say(json.dumps(rows[-1]))
    report(rows, cases, repeats, budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
