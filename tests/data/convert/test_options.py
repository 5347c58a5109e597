"""data/convert/options.py: every convert option checked when it is given, its error naming
the command-line option; the number of worker processes; a preprocess option as a function,
a 'module:function' name or a factory, loaded and named; --column-types parsed."""

from __future__ import annotations

import pytest

from tfperf.data.convert.options import (
    ConvertError,
    ConvertOptions,
    PreprocessFactory,
    describe_preprocess,
    load_preprocess,
    parse_column_types,
    preprocess_label,
)
from tfperf.data.schema import Feature, Schema


def test_compression_is_kept_in_the_manifests_spelling():
    assert ConvertOptions(compression="gzip").compression == "GZIP"
    assert ConvertOptions(compression="none").compression == ""
    assert ConvertOptions().compression == ""


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"compression": "zip"}, "--compression: expected 'gzip' or none, found 'zip'"),
        ({"on_bad_row": "ignore"}, "--on-bad-row: expected 'error' or 'skip'"),
        ({"split": "a/b"}, "--split: expected letters, digits"),
        ({"name": "my data"}, "--name: expected letters, digits"),
        ({"max_examples": -1}, "--max-examples: expected a number >= 0, found -1"),
        ({"shard_bytes": 0}, "--shard-size: expected a size > 0, found 0"),
        ({"column_types": {"a": "int128"}}, "--column-types a"),
        ({"tfds_metadata": True, "compression": "gzip"}, "--tfds-metadata: TFDS reads"),
        ({"preprocess": 42}, "preprocess: expected a callable, 'module:function'"),
        (
            {"column_types": {"a": "int64"}, "schema": Schema.of(Feature(name="a", dtype="int64"))},
            "--column-types: give either --schema",
        ),
    ],
)
def test_a_bad_option_is_named(options, named):
    with pytest.raises(ConvertError, match=named.replace("(", r"\(")):
        ConvertOptions(**options)


def test_worker_count_is_at_most_one_per_shard_and_at_least_one():
    assert ConvertOptions(workers=4).worker_count(2) == 2
    assert ConvertOptions(workers=4).worker_count(10) == 4
    assert ConvertOptions(workers=4).worker_count(0) == 1
    assert 1 <= ConvertOptions().worker_count(100) <= 100


def shout(row: dict) -> dict:
    return {k: str(v).upper() for k, v in row.items()}


def shouting(suffix: str):
    return lambda row: {k: f"{v}{suffix}" for k, v in row.items()}


def test_a_preprocess_option_is_loaded_and_named_however_it_was_given():
    factory = PreprocessFactory(f"{__name__}:shouting", {"suffix": "!"}, "shouting with !")
    assert load_preprocess(None) is None and load_preprocess(shout) is shout
    assert load_preprocess(factory)({"a": "x"}) == {"a": "x!"}
    assert load_preprocess("json:dumps") is __import__("json").dumps
    assert describe_preprocess(shout) == f"{__name__}:shout"
    assert describe_preprocess(factory) == "shouting with !"
    assert preprocess_label("m:f") == "--preprocess m:f"  # the option as the user gave it
    assert preprocess_label(factory) == "preprocess shouting with !"
    assert describe_preprocess(None) is None and preprocess_label(None) is None


def test_column_types_are_parsed_and_malformed_items_named():
    assert parse_column_types("zip=bytes, n = int32") == {"zip": "bytes", "n": "int32"}
    for bad in ("zip", "zip=", "=bytes", "a=int64,,b=bytes"):
        with pytest.raises(ConvertError, match="--column-types: expected NAME=DTYPE"):
            parse_column_types(bad)
