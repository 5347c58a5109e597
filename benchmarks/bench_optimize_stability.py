"""Is `tfperf.optimize` stable? Issue 19 section 3: three runs on the same pipeline keep the
same changes wherever a change gains 1.3x or more. Per public pipeline (the corpus of
tests/doctor/public_pipelines/), `optimize(ds, None, budget_s=BUDGET)` runs N times, each
in a fresh child process (as a new user's runs would); the report lists what each run kept,
with its measured ratio, and whether every change that gained >= 1.3x in one run was kept
in all of them.

    python benchmarks/bench_optimize_stability.py [--runs 3] [--budget 30] [--cases a,b]
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench_doctor_public import _pop, load_cases
from common import DATA_ROOT, machine, parse_args, say, table

BIG = 1.3  # a change that gains this much must be kept by every run
DEFAULT_CASES = ("tfrecord_features", "jena_window_generator", "fashion_mnist_tfrecord")


def one_run(name: str, budget: float) -> dict[str, Any]:
    """In the child: one optimize of the case's pipeline alone; what it kept and each
    kept trial's measured ratio (candidate / best so far)."""
    import time

    import tfperf

    case = load_cases().BY_NAME[name]
    folder = load_cases().make(case, DATA_ROOT / "doctor_public")
    ds = case.original(folder, batch_size=case.batch_size)
    t0 = time.perf_counter()
    _, report = tfperf.optimize(ds, None, budget_s=budget)
    ratios = {t.name: t.ratio for t in report.fix.trials if t.kept}
    gains = {t.name: t.ratio for t in report.fix.trials if t.ratio is not None}
    return {"kept": report.kept, "ratios": ratios, "gains": gains, "s": time.perf_counter() - t0}


def child(name: str, budget: float) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", name, "--budget", str(budget)]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=budget * 3 + 300)
    except subprocess.TimeoutExpired:
        return {"error": "killed: over its time limit"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": f"exit {proc.returncode}"}


def stable(runs: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    """(every >= BIG change kept by all runs, those changes)."""
    big = sorted(
        {n for r in runs for n, g in (r.get("gains") or {}).items() if g and g >= BIG}
        & {n for r in runs for n in r.get("kept") or []}
    )
    return all(n in (r.get("kept") or []) for r in runs for n in big), big


def main() -> int:
    argv = sys.argv[1:]
    name, chosen = _pop(argv, "--child"), _pop(argv, "--cases")
    budget = float(_pop(argv, "--budget") or 30)
    n_runs = int(_pop(argv, "--runs") or 3)
    parse_args(__doc__.split("\n\n")[0], argv)
    if name:
        print(json.dumps(one_run(name, budget)), flush=True)
        return 0
    names = chosen.split(",") if chosen else list(DEFAULT_CASES)
    rows, verdicts = [], []
    for case in names:
        runs = []
        for i in range(n_runs):  # one at a time: two runs at once would share the cores
            say(f"{case}: optimize run {i + 1}/{n_runs} (budget {budget:.0f} s)")
            runs.append(child(case, budget))
            say(json.dumps(runs[-1]))
        ok, big = stable(runs)
        verdicts.append(ok)
        for i, r in enumerate(runs):
            kept = r.get("error") or ", ".join(
                f"{k} ({r['ratios'][k]:.2f}x)" if r["ratios"].get(k) else k for k in r["kept"]
            )
            rows.append(
                [case, str(i + 1), kept or "nothing", f"{r.get('s', 0):.0f}"]
                + [", ".join(big) or "-", "yes" if ok else "NO"]
            )
    print("## optimize, run three times\n")
    print(
        f"{machine()}. `tfperf.optimize(ds, None, budget_s={budget:.0f})` on each pipeline "
        f"alone, {n_runs} runs, each in a fresh process. kept: the changes a run kept, with "
        "the ratio its trial measured (candidate / best so far); >= 1.3x: the changes that "
        f"gained at least {BIG}x in some run; stable: every run kept all of those.\n"
    )
    print(table(["pipeline", "run", "kept", "s", ">= 1.3x", "stable"], rows))
    print(f"\nStable on {sum(verdicts)} of {len(verdicts)} pipelines.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
