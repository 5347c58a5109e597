"""runreport/shapes: the fields of doctor.json and summary.json the report reads, checked
before drawing: the real shapes pass, another shape is named by its field."""

from __future__ import annotations

import pytest

from tfperf.runreport.shapes import DOCTOR, SUMMARY, ShapeError, check_shape


def test_the_doctors_and_trains_own_shapes_pass(diagnosis, fix):
    check_shape({"runfile": "r.yaml", "diagnosis": diagnosis, "fix": fix}, DOCTOR, "d", "w")
    check_shape({"runfile": None, "diagnosis": None, "fix": None}, DOCTOR, "d", "w")
    check_shape({"steps": 3, "final_loss": 0.5, "extra": {"any": "thing"}}, SUMMARY, "s", "w")


def test_a_variant_rate_and_a_deep_field_are_named(diagnosis):
    diagnosis = {**diagnosis, "variants": {"batch 1024": "quick"}}
    with pytest.raises(ShapeError) as err:
        check_shape({"diagnosis": diagnosis}, DOCTOR, "run/doctor.json", "tfperf doctor X")
    msg = str(err.value)
    assert msg.startswith(
        "run/doctor.json: field 'diagnosis.variants.batch 1024': expected a number, "
        "found text, 'quick'"
    )
    assert "(written by `tfperf doctor X`): run that command again" in msg


def test_a_huge_value_is_quoted_cut():
    with pytest.raises(ShapeError) as err:
        check_shape({"final_loss": "x" * 100_000}, SUMMARY, "s.json", "w")
    assert "(99,940 characters cut)" in str(err.value) and len(str(err.value)) < 400
