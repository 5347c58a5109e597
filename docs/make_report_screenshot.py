"""Makes docs/report.png, the README's picture of `tfperf report`, from a real short run of
the chess workload with its per-example parse left slow (so the doctor has something to
find): train, evaluate every checkpoint, `tfperf doctor --fix` (its result saved into the
run folder), `tfperf report`, then the page opened in headless Chromium (Debian's
/usr/bin/chromium, driven by playwright) and its top part saved.

    .venv/bin/python docs/make_report_screenshot.py     # ~2 minutes; writes runs/report_demo/
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "report"))

from browser import open_reports, unavailable  # noqa: E402

WORK = REPO / "runs" / "report_demo"
RUNFILE = "examples/chess.yaml"
SETTINGS = {
    "data.dir": WORK / "data",
    "data.examples": 20000,
    "data.eval_examples": 2000,
    "train.out_dir": WORK / "train",
    "train.max_steps": 600,
    "train.max_time": "null",
    "train.log_every": 10,
    "train.checkpoint.every_steps": 100,
    "train.checkpoint.keep": 10,  # every checkpoint stays for the evaluator: 6 points
    "pipeline.batch_size": 128,
    "pipeline.parse": "per_example",  # the slow way: the doctor's first finding
    "pipeline.preprocess_parallelism": 1,
}
SCREENSHOT = REPO / "docs" / "report.png"
UNTIL = "findings"  # the page kept down to this section: verdict, rates, stages, findings


def tfperf(*args: object) -> None:
    sets = [item for k, v in SETTINGS.items() for item in ("--set", f"{k}={v}")]
    argv = [str(a) for a in args]
    print("+ tfperf", " ".join(argv), "--set ...", flush=True)
    cmd = [sys.executable, "-m", "tfperf.cli.main", *argv[:2], *sets, *argv[2:]]
    subprocess.run(cmd, cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    why = unavailable()
    if why:
        sys.exit(f"cannot take the screenshot: {why}")
    tfperf("train", RUNFILE, "--no-progress")
    tfperf("evaluate", RUNFILE, "--watch", "--all")
    fixed = WORK / "chess.optimized.yaml"
    tfperf("doctor", RUNFILE, "--fix", "--budget", "120", "--out", fixed)
    report = WORK / "report.html"
    run_dir = (WORK / "train").relative_to(REPO)  # the page's title names it
    subprocess.run(
        [sys.executable, "-m", "tfperf.cli.main", "report", str(run_dir), "-o", str(report)],
        cwd=REPO,
        check=True,
    )
    (page,) = open_reports([(report, SCREENSHOT)], width=1200, until=UNTIL)
    if page.errors:
        sys.exit(f"the page logged errors: {page.errors}")
    print(f"wrote {SCREENSHOT} ({len(page.charts)} charts drawn)")


if __name__ == "__main__":
    main()
