"""The doctor's diagnosis (doctor/diagnosis/diagnose.py) on a suite of deliberately slow
pipelines (tests/helpers/slow_pipelines.py): each names its own problem first, every
measurement a real positive number; the compute-side findings on well-fed models; a dataset
handed in place of the run file's pipeline; and the verdict's thresholds."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import tensorflow as tf

from tfperf.config import config_from_dict
from tfperf.doctor.diagnosis.diagnose import diagnose
from tfperf.doctor.diagnosis.more_rounds import MIN_REQUIRED_REPEATS, second_look, top_up
from tfperf.doctor.diagnosis.verdict import (
    REQUIRED,
    boundary_of,
    inconsistency,
    input_keeps_up,
    rates_overlap,
    shares_cores,
)
from tfperf.doctor.evidence.evidence import PAIRED_COMPUTE, XLA_VARIANT
from tfperf.doctor.probes.budget import Budget
from tfperf.doctor.probes.generator_sample import LEAST
from tfperf.doctor.probes.target import dataset_probe
from tfperf.measure import SECOND_LOOK_PAIRS, Measurement, Probe, Run, compare, side_by_side
from tfperf.observe.feed import verdict_for

from helpers import slow_pipelines as sp

# Input cases time no compute what-ifs (their rules are tested on their own in rules/).
FAST = {"steps": 4, "warmup": 2, "repeats": 2, "min_seconds": 0.05, "what_ifs": []}


def run_cfg(name: str, model: str = "tiny_model", data_dir: str | None = None, **sections):
    data = {"pipeline": f"helpers.slow_pipelines:{name}"}
    if data_dir:
        data["dir"] = data_dir
    cfg = {
        "data": data,
        "model": {"name": f"helpers.slow_pipelines:{model}", "loss": "mse"},
        "pipeline": {"batch_size": 32},
        "doctor": dict(FAST),
    }
    for key, value in sections.items():
        cfg.setdefault(key, {}).update(value)
    return config_from_dict(cfg)


def test_verdict_thresholds():
    assert verdict_for(0.25) == "highly input-bound"
    assert verdict_for(0.20) == "highly input-bound"
    assert verdict_for(0.07) == "moderately input-bound"
    assert verdict_for(0.01) == "not input-bound"


def _rates(name: str, *rates: float) -> Measurement:
    return Measurement(name, [Run(1.0, 10, int(r)) for r in rates])


@pytest.mark.parametrize(
    ("pipeline", "compute", "training", "said"),
    [
        # Training at or below both, or above within their spreads: consistent.
        ((1000, 1100), (5000, 5200), (900, 950), None),
        ((1000, 1100), (5000, 5200), (1050, 1120), None),
        # Above the pipeline's fastest repeat, but within MARGIN (30%) of it: consistent.
        ((1000, 1100), (5000, 5200), (1200, 1250), None),
        # Training's slowest repeat above the pipeline alone's fastest: no verdict.
        (
            (900, 910),
            (5000, 5100),
            (1700, 1720),
            "training 1,710 (1,700-1,720) examples/s is faster than the pipeline alone 905 "
            "(900-910) beyond their spreads",
        ),
        # Above the compute limit too, with the host's load swinging between rounds.
        (
            (900, 1800),
            (1000, 1050),
            (2500, 2600),
            "training 2,550 (2,500-2,600) examples/s is faster than the pipeline alone 1,350 "
            "(900-1,800) and training 2,550 (2,500-2,600) examples/s is faster than the "
            "compute limit 1,025 (1,000-1,050) beyond their spreads; the host's load changed "
            "between rounds (slowest to fastest repeat: pipeline 2.0x)",
        ),
    ],
)
def test_training_faster_than_what_bounds_it_is_an_inconsistent_measurement(
    pipeline, compute, training, said
):
    got = inconsistency(
        _rates("pipeline", *pipeline), _rates("compute", *compute), _rates("training", *training)
    )
    assert got == said


# ---- one slow pipeline per finding: the doctor names it first --------------------------------
# Records read from files are counted (rewrites/cache.py): where they all fit the RAM
# budget a cache of the parsed records comes first. The read-and-parse case models a dataset
# larger than RAM, where it cannot. A sequential batched map, files read one at a time, a
# per-example map and a py_function are the user pipelines' cases (test_user_pipelines.py:
# sequential_heavy_map, no_interleave, text_per_example, numpy_function); the per-example
# parse here is already parallel.
LARGER_THAN_RAM = {"pipeline": {"shuffle_ram_mb": 0.01}}
CASES = [
    ("per_example_parse", "per_example_parse", LARGER_THAN_RAM),
    ("no_prefetch", "no_prefetch", {}),
    ("no_cache", "no_cache", {}),
    ("deterministic", "deterministic", {}),
    ("from_generator", "from_generator", {}),
    ("float64", "float64", {}),
    ("shuffle_over_budget", "shuffle_over_budget", {"pipeline": {"shuffle_ram_mb": 0.1}}),
]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("records")
    sp.write_records(root)
    return str(root)


@pytest.fixture(scope="module")
def diagnosed(records):
    """diagnosed(name, model, sections): the diagnosis of run_cfg(name, model, ...) on the
    records, measured once in this module; the tests reading the same run share it."""
    done: dict[str, Any] = {}

    def get(name: str, model: str = "tiny_model", sections: dict | None = None) -> Any:
        key = repr((name, model, sorted((sections or {}).items())))
        if key not in done:
            done[key] = diagnose(run_cfg(name, model, data_dir=records, **(sections or {})))
        return done[key]

    return get


@pytest.mark.parametrize(("pipeline", "code", "extra"), CASES, ids=[c[0] for c in CASES])
def test_slow_pipeline_named_first(pipeline, code, extra, diagnosed):
    model = "wide_tiny_model" if pipeline == "shuffle_over_budget" else "tiny_model"
    check_named_first(diagnosed(pipeline, model, extra), code)


# The compute-side findings: a well-fed model that a bigger batch or another precision helps.
# Each model's step has a fixed cost (a sleep), so the other core's load cannot make the
# cheap input look like the limit.
COMPUTE_CASES = [
    ("small_batch", "clean", "step_cost_model", 2, ["batch"]),
    ("precision", "wide_clean", "float32_slow_model", 64, ["precision"]),
]


@pytest.mark.parametrize(
    ("code", "pipeline", "model", "batch", "what_ifs"),
    COMPUTE_CASES,
    ids=[c[0] for c in COMPUTE_CASES],
)
def test_compute_finding_named_first(code, pipeline, model, batch, what_ifs):
    cfg = run_cfg(pipeline, model, pipeline={"batch_size": batch}, doctor={"what_ifs": what_ifs})
    diag = check_named_first(diagnose(cfg), code)
    assert diag.findings[0].kind == "compute" and diag.findings[0].expected_speedup > 1


def check_named_first(diag, code):
    assert diag.findings, f"no findings; verdict {diag.verdict}; variants {diag.variants}"
    first = diag.findings[0]
    assert first.code == code, [f.code for f in diag.findings]
    assert first.evidence and first.change and first.expected
    if first.kind == "input":
        assert diag.verdict != "not input-bound"
    # every measurement is a real positive number
    assert diag.pipeline.examples_per_s.median > 0 and diag.compute.examples_per_s.median > 0
    assert 0.0 <= diag.input_bound_fraction <= 1.0
    return diag


def test_input_bound_pipeline_reports_slowest_stage(diagnosed):
    diag = diagnosed("no_cache")
    # Highly input-bound, or no verdict with the contradiction said: beside the suite's other
    # workers on 2 cores, training once read over 1.3x the pipeline alone beyond both spreads,
    # and the doctor drew no verdict from that, as it should.
    said = diag.inconsistent
    assert diag.verdict == "highly input-bound" or (said and "faster than" in said), diag.verdict
    # The planted cost is a map's: named alone, or tied within noise and said so.
    marked = diag.slowest_stages
    assert any(label.startswith("map#") for label in marked), diag.stages
    named = marked[0] if len(marked) == 1 else " or ".join(marked) + " (within noise)"
    assert diag.slowest_stage == named
    d = diag.to_dict()
    assert d["findings"][0]["code"] == "no_cache"
    assert {"pipeline", "compute_limit", "training", "stages"} <= set(d)


def test_float64_measured_against_float32_inputs(diagnosed):
    diag = diagnosed("float64")  # no compute what-ifs (FAST)
    assert "float32 inputs" in diag.variants and diag.variants["float32 inputs"] > 0
    f = next(f for f in diag.findings if f.code == "float64")
    assert "features" in f.evidence


def test_dataset_argument_replaces_the_run_file_pipeline():
    x = np.ones((64, sp.DIM), "float32")
    ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(16).map(lambda a, b: (a * 2, b))
    cfg = run_cfg("clean")
    diag = diagnose(cfg, dataset=ds)
    assert diag.batch_size == 16
    assert any(f.code == "no_prefetch" for f in diag.findings) or diag.verdict == "not input-bound"


def test_other_work_on_the_cores_is_measured_said_and_given_to_the_cost_model():
    """A busy loop in another process while the rates are timed: the diagnosis says how many
    cores other work kept busy (median with its range), the cost model shares what was left,
    and the note says so in every output."""
    x = np.ones((64, sp.DIM), "float32")
    ds = tf.data.Dataset.from_tensor_slices((x, x[:, :1])).batch(16)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        diag = diagnose(run_cfg("clean"), dataset=ds)
    finally:
        hog.kill()
        hog.wait()
    load = diag.to_dict()["host_load"]
    assert load is not None and load["intervals"] >= 3
    low, high = load["others_busy_cores_range"]
    assert 0.2 <= load["others_busy_cores"] and low <= load["others_busy_cores"] <= high
    assert diag.costs is not None and diag.costs.cores == load["free_cores"] <= load["cores"]
    note = next(n for n in diag.notes if n.startswith("a busy host"))
    assert f"{load['others_busy_cores']:.1f} ({low:.1f}-{high:.1f})" in note
    assert f"give input and model the {diag.costs.cores:.1f} cores" in note
    assert note in str(diag)


# ---- what a resume loses: an iterator TensorFlow cannot save -----------------------------------
def test_a_generator_fed_pipeline_cannot_be_checkpointed(diagnosed):
    diag = diagnosed("from_generator")
    # Its gain was measured on a sample as small as this doctor's measurements (4 steps).
    gen = next(f for f in diag.findings if f.code == "from_generator")
    assert f"sample of {LEAST:,} elements" in gen.evidence, gen.evidence
    f = next(f for f in diag.findings if f.code == "input_not_checkpointable")
    assert "from_generator" in f.evidence and "PyFunc is stateful" in f.evidence
    assert (
        "train.checkpoint_input=false" in f.change and "restarts the input pipeline" in f.expected
    )
    assert f.kind == "resume" and f.expected_speedup is None


def test_with_a_target_the_pipelines_own_findings_come_first():
    """Issue 30: with a target the pipeline alone misses, the model's step on this host is
    not the accelerator the target stands for: the findings that raise the pipeline's own
    rate come before this CPU's compute findings, each side in its rank."""
    from tfperf.doctor.diagnosis.diagnose import pipeline_first
    from tfperf.doctor.evidence.findings import Finding

    def finding(code: str, kind: str, gain: float) -> Finding:
        return Finding(code, code, None, "", "", "", gain, kind)

    ranked = [
        finding("xla", "compute", 3.0),
        finding("small_batch", "compute", 2.0),
        finding("sequential_map", "input", 1.8),
        finding("no_prefetch", "input", 1.2),
    ]
    assert [f.code for f in pipeline_first(ranked)] == [
        "sequential_map",
        "no_prefetch",
        "xla",
        "small_batch",
    ]
    cfg = run_cfg(
        "py_function",
        "step_cost_model",
        pipeline={"batch_size": 2},
        doctor={"what_ifs": ["batch"], "target": 1e9},
    )
    diag = diagnose(cfg)
    kinds = [f.kind for f in diag.findings]
    assert "input" in kinds, [f.code for f in diag.findings]
    first_compute = kinds.index("compute") if "compute" in kinds else len(kinds)
    assert all(k == "compute" for k in kinds[first_compute:]), [f.code for f in diag.findings]
    assert diag.headline.startswith("verdict: input-bound on the target")


def test_a_verdict_without_a_rate_says_which_and_what_the_others_say():
    """Issue 30: a rate abandoned at the budget's end makes a verdict 'not measured'
    naming it; with only training missing, the two measured rates still say which side
    sets the pace."""
    from tfperf.doctor.diagnosis.verdict import drawn_without

    slow = Measurement("pipeline", [Run(1.0, 10, 300), Run(1.0, 10, 320)])
    fast = Measurement("compute limit", [Run(1.0, 10, 9000)])
    only_training = drawn_without(["training"], slow, fast)
    assert only_training.startswith("not measured (training: ")
    assert "the input sets the pace" in only_training and "310" in only_training
    assert "the model's step sets the pace" in drawn_without(["training"], fast, slow)
    both = drawn_without(["pipeline", "training"], Measurement("pipeline"), fast)
    assert both.startswith("not measured (pipeline, training: ") and "pace" not in both


def _required_probes() -> list:
    d = config_from_dict({"doctor": dict(FAST)}).doctor
    ds = tf.data.Dataset.range(10_000).map(lambda x: tf.cast(x, tf.float32)).batch(32)
    probes = [dataset_probe(name, ds, d, time_limit=0.2) for name in REQUIRED]
    stage = dataset_probe("stage map#1", ds, d, time_limit=0.2)
    return [*probes, stage]


@pytest.mark.parametrize(("seconds", "rounds"), [(60.0, MIN_REQUIRED_REPEATS), (0.01, 1)])
def test_the_required_rates_get_their_repeats_when_a_round_fits(seconds, rounds):
    """One round of everything (as when the stage prefixes took the phase's time), then the
    three required rates alone until each has MIN_REQUIRED_REPEATS repeats; a budget with no
    room for a round adds none. The stage prefix is never timed again."""
    probes = _required_probes()
    measured = side_by_side(probes, repeats=1)
    top_up(
        measured,
        probes,
        config_from_dict({"doctor": dict(FAST)}).doctor,
        lambda _: None,
        Budget(seconds),
    )
    assert [len(measured[n].runs) for n in REQUIRED] == [rounds] * 3
    assert len(measured["stage map#1"].runs) == 1


def _scripted(name: str, rates: list[float]) -> Probe:
    """A probe whose repeats read `rates` in turn (1 s each), then its last rate."""
    left = list(rates)
    return Probe(name, lambda: Run(1.0, 1, int(left.pop(0) if len(left) > 1 else left[0])))


def test_a_what_if_with_one_pair_against_its_gain_gets_a_second_look():
    """XLA 1.3x with one of three pairs below 1 (a loaded host's slow moment): two more
    rounds of it and its reference, so that it has SECOND_LOOK_PAIRS pairs; a what-if
    faster in every pair, or with two pairs against, gets none; no room, no rounds."""

    def probes():
        return [
            _scripted(PAIRED_COMPUTE, [1000.0] * 5),
            _scripted(XLA_VARIANT, [1300.0, 900.0, 1400.0, 1250.0, 1350.0]),
            _scripted("precision=mixed_bfloat16", [1200.0, 1250.0, 1300.0]),
            _scripted("steps per call=1", [900.0, 950.0, 1300.0]),
        ]

    ps = probes()
    measured = side_by_side(ps, repeats=3)
    second_look(measured, ps, {}, lambda _: None, Budget(60.0))
    counts = {n: len(m.runs) for n, m in measured.items()}
    assert counts == {
        PAIRED_COMPUTE: SECOND_LOOK_PAIRS,
        XLA_VARIANT: SECOND_LOOK_PAIRS,
        "precision=mixed_bfloat16": 3,
        "steps per call=1": 3,
    }
    assert compare(measured[PAIRED_COMPUTE], measured[XLA_VARIANT]).ratios == (
        1.3,
        0.9,
        1.4,
        1.25,
        1.35,
    )
    ps = probes()
    measured = side_by_side(ps, repeats=3)
    second_look(measured, ps, {}, lambda _: None, Budget(0.5))  # a round takes ~4 s
    assert {len(m.runs) for m in measured.values()} == {3}


def test_one_repeat_asked_for_is_one_repeat():
    probes = _required_probes()
    measured = side_by_side(probes, repeats=1)
    one = config_from_dict({"doctor": {**FAST, "repeats": 1}}).doctor
    top_up(measured, probes, one, lambda _: None, Budget(60.0))
    assert [len(measured[n].runs) for n in REQUIRED] == [1, 1, 1]


def test_a_pipeline_alone_that_overlaps_the_compute_limit_may_set_the_pace():
    """Overlapping repeats, or medians within NEAR: input or model may set the pace (said,
    with both ranges); one clearly faster in every repeat: no such statement."""
    said = rates_overlap(_rates("pipeline", 4900, 10000), _rates("compute", 6300, 7900))
    assert said is not None and "4,900-10,000" in said and "6,300-7,900" in said
    assert rates_overlap(_rates("pipeline", 8000, 8200), _rates("compute", 6800, 7000))
    assert rates_overlap(_rates("pipeline", 20000, 30000), _rates("compute", 6300, 7900)) is None
    assert rates_overlap(_rates("pipeline", 100, 200), _rates("compute", 6300, 7900)) is None


def test_close_rates_make_a_boundary_statement_unless_every_repeat_waited_a_tenth():
    close = "the two rates overlap"
    assert boundary_of([0.01, 0.03], close) == (
        "between input-bound and not input-bound: 1-3% (the two rates overlap)"
    )
    assert boundary_of([0.06, 0.25], close).startswith("between input-bound and not")
    # Every repeat waited 10% or more: the input set the pace in each, its band is said.
    assert boundary_of([0.13, 0.25], close) == "between highly and moderately input-bound: 13-25%"
    assert boundary_of([0.45, 0.5], close) is None  # input-bound however close the rates
    assert boundary_of([0.01, 0.03], None) is None


def test_a_model_on_the_cores_of_an_input_within_3x_of_it_leaves_the_verdict_open():
    """Neither rate FAR beyond the other: the input and the model take cores from each
    other, and the statement is open however much or little the repeats waited."""
    chess = shares_cores(_rates("pipeline", 11000, 11040), _rates("compute", 15900, 18300), 2)
    assert chess is not None and "share this host's 2 CPU cores" in chess
    assert "11,000-11,040" in chess and "15,900-18,300" in chess
    jena = shares_cores(_rates("pipeline", 7800, 9800), _rates("compute", 5000, 5500), 2)
    assert jena is not None
    # One FAR (3x) beyond the other in every repeat: the wait's band stands.
    assert (
        shares_cores(_rates("pipeline", 7000, 13800), _rates("compute", 95500, 109500), 2) is None
    )
    assert shares_cores(_rates("pipeline", 66000, 88000), _rates("compute", 7100, 8300), 2) is None
    # Not timed: nothing to compare.
    assert shares_cores(Measurement("pipeline"), _rates("compute", 5000), 2) is None
    # A py_function pipeline beside two CPU hogs: the medians 5.9x apart, the limit's spread
    # reaching within 3x of the pipeline's fastest, every repeat waiting 87-98%: the input
    # set the pace in each, and the wait's band stands.
    slow, fast = _rates("pipeline", 1597, 3786, 3908), _rates("compute", 11351, 22511, 29992)
    assert shares_cores(slow, fast, 2) is not None
    assert shares_cores(slow, fast, 2, [0.87, 0.93, 0.98]) is None
    assert boundary_of([0.87, 0.93, 0.98], None, 1.2, shares_cores(slow, fast, 2, [0.87])) is None
    # A repeat below 20%, or medians within 3x (chess, jena): the statement stays open.
    assert shares_cores(slow, fast, 2, [0.15, 0.9]) is not None
    assert shares_cores(_rates("pipeline", 7800, 9800), fast, 2, [0.9, 0.95]) is not None
    for waits in ([0.35, 0.45], [0.03, 0.05], [0.13, 0.2]):
        said = boundary_of(waits, None, 1.5, shared=chess)
        assert said is not None and said.startswith("between input-bound and not input-bound: ")
        assert said.endswith(f"({chess})")
    assert boundary_of(
        [0.35, 0.45], None, 1.5
    ) == "between highly and moderately input-bound: 35-45%" + (
        " (within the noise: training's repeats ranged 1.5x; a wait may read 2x lower in "
        "another run on a shared host)"
    )


def test_a_wait_is_judged_at_half_its_least_repeat_and_at_its_noisy_most():
    # Training's repeats 1.9x apart: 3-4% reads as within the noise of the 5% threshold.
    assert boundary_of([0.03, 0.04], None) is None  # all not input-bound, taken as measured
    said = boundary_of([0.03, 0.04], None, noise=1.9)
    assert said == (
        "between input-bound and not input-bound: 3-4% (within the noise: training's "
        "repeats ranged 1.9x; a wait may read 2x lower in another run on a shared host)"
    )
    # 32-43% (highly in every repeat) is 16% at half its least: near the 20% threshold.
    said = boundary_of([0.32, 0.43], None)
    assert said is not None and said.startswith("between highly and moderately input-bound: 32-43%")
    # Far from a threshold: the verdict stands.
    assert boundary_of([0.01, 0.02], None, noise=1.2) is None
    assert boundary_of([0.9, 0.95], None, noise=2.5) is None
    assert boundary_of([0.12, 0.15], None, noise=1.05) is None  # 6-16%: moderately


def test_a_pipeline_far_beyond_its_model_keeps_up_whatever_a_short_wait_read():
    """The pipeline alone 3x the compute limit or more (slowest repeat against fastest):
    waits under the highly-input-bound threshold are the host's load, the verdict "not
    input-bound" with them said; closer rates, or a wait of a fifth, keep the measured one."""
    far = _rates("pipeline", 14000, 16000), _rates("compute", 1100, 1250)
    said = input_keeps_up([0.01, 0.06, 0.03], *far)
    assert said is not None and said.startswith("not input-bound: 1-6% waiting"), said
    assert "14,000-16,000" in said and "1,100-1,250" in said and "11.2x" in said
    assert input_keeps_up([0.05, 0.25], *far) is None  # a fifth waiting: measured as is
    assert input_keeps_up([], *far) is None  # training not timed
    near = _rates("pipeline", 3000, 4000), _rates("compute", 1100, 1250)
    assert input_keeps_up([0.01, 0.06], *near) is None
