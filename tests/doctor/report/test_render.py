"""What the doctor found, rendered (doctor/report/render.py): the verdict first, the three
rates and every what-if side by side, the stage prefixes with the slowest marked, the
findings most promising first (folded, never cut), the notes; no findings said as such;
and --fix's before/after table with each trial beside the best so far, what was kept, the
code edits, model.compile's keywords, what was withheld and what was written."""

from __future__ import annotations

import io

from rich.console import Console

from tfperf.doctor.evidence.findings import Diagnosis, Finding, StageTiming
from tfperf.doctor.fix.trials import FixResult, FixTrial
from tfperf.doctor.report.render import (
    diagnosis_json,
    render_diagnosis,
    render_findings,
    render_fix,
)
from tfperf.measure import Measurement, Probe, Run, compare, side_by_side


def measured(name: str, rate: float, wait: float = 0.0) -> Measurement:
    return Measurement(name, [Run(1.0, int(rate) // 10, int(rate), wait_seconds=wait)] * 2)


def diagnosis(findings: list[Finding], verdict: str = "highly input-bound") -> Diagnosis:
    wait = 0.0 if verdict == "not input-bound" else 0.6
    return Diagnosis(
        "my_pipe:make",
        "tiny",
        32,
        "float32",
        measured("pipeline", 900.0),
        measured("compute limit", 5000.0),
        measured("training", 850.0, wait),
        [
            StageTiming(0, "source#0", "source", 50_000.0, 20.0),
            StageTiming(1, "map#1 (sequential)", "map", 900.0, 1091.1),
            StageTiming(2, "batch#2 (batch=32)", "batch", None, None, "cannot run alone"),
        ],
        "map#1 (sequential)",
        verdict,
        findings,
        variants={"precision=mixed_bfloat16": 6100.0, "training at batch=128": 1200.0},
        notes=["float32 inputs: not measured (ValueError: no)"],
    )


def text(render, *args, width: int = 200) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    render(*args, console)
    return console.export_text()


SEQUENTIAL = Finding(
    "sequential_map",
    "map without parallelism",
    "map#1 (sequential)",
    "pipeline up to map#1: 900 ex/s",
    "pass num_parallel_calls=tf.data.AUTOTUNE (run file: pipeline.preprocess_parallelism: auto)",
    "training ~1.8x faster",
    1.8,
    "input",
    1,
)


def test_the_diagnosis_opens_with_the_verdict_then_the_numbers():
    out = text(render_diagnosis, diagnosis([SEQUENTIAL]), width=100)
    assert out.startswith("verdict: highly input-bound (input wait 60% of training)")
    assert "my_pipe:make with model tiny (batch 32, float32): highly input-bound" in out
    assert "(a) pipeline alone" in out and "900" in out and "5,000" in out
    # Compute what-ifs named as such; a training what-if by its own name.
    assert "compute with precision=mixed_bfloat16" in out and "6,100" in out
    assert "training at batch=128" in out and "compute with training" not in out
    assert "map#1 (sequential) <- slowest" in out and "1091.1" in out
    # The change folded in its column, every character of it kept.
    assert "sequential_map" in out and "pipeline.preprocess_p" in out and "arallelism: auto" in out
    assert "note: float32 inputs: not measured (ValueError: no)" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    assert "…" not in out  # folded, not cut


def test_no_findings_are_said_with_the_reason():
    quiet = text(render_findings, diagnosis([], "not input-bound"))
    assert quiet.strip() == "no findings: the run is not input-bound, so no input advice"
    assert text(render_findings, diagnosis([])).strip() == "no findings"
    assert diagnosis_json(diagnosis([SEQUENTIAL])) == diagnosis([SEQUENTIAL]).to_dict()


def _steady(name: str, rate: float) -> Probe:
    return Probe(name, lambda: Run(1.0, 10, int(rate)))


def _result(after: float, **fields) -> FixResult:
    m = side_by_side([_steady("original", 1000), _steady("optimized", after)], repeats=3)
    trials = [
        FixTrial("prefetch at the end", "prefetch at the end", 1500.0, True, "faster"),
        FixTrial("parallel batch", "parallel batch", None, False, "not applicable"),
    ]
    trials[0].ratio, trials[0].low, trials[0].high = 1.5, 1.4, 1.6
    trials[0].baseline, trials[0].predicted = 1000.0, 1.3
    check = compare(m["original"], m["optimized"])
    result = FixResult(1000.0, after, trials, **{"written": [], "check": check, **fields})
    result.optimized = after  # the optimized pipeline's rate in the final check
    return result


def test_the_fix_table_shows_each_trial_against_the_best_so_far():
    result = _result(
        1500.0,
        written=["run.optimized.py", "run.optimized.yaml"],
        predicted=1.3,
        code_edits=["prefetch at the end: my_pipe.py:7: end the pipeline with .prefetch(...)"],
        compile_kwargs={"jit_compile": True},
        withheld=["precision: not applied, it changes the results"],
    )
    out = text(render_fix, result)
    title = (
        "training: final check: original 1,000 vs optimized 1,500 examples/s, 1.50x paired "
        "(1.50-1.50); predicted ~1.30x"
    )
    assert title in out.replace("\n", " ")
    assert "1,500 vs 1,000" in out and "~1.30x" in out and "1.50x paired (1.40-1.60)" in out
    assert "not applicable" in out and "kept" in out
    assert "before: the original in the final check" in out
    assert "my_pipe.py:7: end the pipeline" in out
    assert "for model.compile(..., jit_compile=True)" not in out
    assert "for model.fit: model.compile(..., jit_compile=True)" in out
    assert "withheld: precision: not applied" in out
    assert "wrote run.optimized.py" in out and "wrote run.optimized.yaml" in out


def test_a_fix_that_kept_nothing_says_so():
    slower = _result(800.0)
    out = text(render_fix, slower)
    assert "0.80x paired (0.80-0.80): not faster, no speed change kept" in out.replace("\n", " ")
    assert "no change was kept: nothing written" in out
    nothing = FixResult(1000.0, 1000.0, [], [])
    said = "training: before: the original in the final check, 1,000 examples/s; no change timed as"
    assert said in text(render_fix, nothing).replace("\n", " ")
