"""util/yaml_load: YAML a user wrote is read as safe_load reads it, but aliases that would
expand past MAX_VALUES values, or an anchor that holds itself, are refused before anything
is built from them, naming where the text came from and what was found."""

from __future__ import annotations

import time

import pytest
import yaml

from tfperf.util.yaml_load import MAX_VALUES, YamlBombError, expanded_size, load_yaml


def bomb(levels: int = 8) -> str:
    """The billion laughs: each anchor's list repeats the one before 9 times."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in range(1, levels + 1):
        lines.append(f"l{k}: &l{k} [" + ",".join([f"*l{k - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_plain_yaml_anchors_and_merge_keys_load_as_safe_load_does():
    text = "base: &b {x: 1, y: [1, 2]}\nother: *b\nmerged:\n  <<: *b\n  y: 3\nempty:\n"
    assert load_yaml(text, "run.yaml") == yaml.safe_load(text)
    assert load_yaml("", "run.yaml") is None
    with pytest.raises(yaml.YAMLError):
        load_yaml("a: [unclosed\n", "run.yaml")


def test_an_alias_bomb_is_refused_before_it_is_expanded():
    start = time.process_time()
    with pytest.raises(YamlBombError) as err:
        load_yaml(bomb(8), "bomb.yaml")
    # expanded it is 9**9 + ... values: counting them must not build them
    assert time.process_time() - start < 5
    msg = str(err.value)
    assert msg.startswith(f"bomb.yaml: expected at most {MAX_VALUES:,} values")
    assert "found 72 aliases (the first: *l0 on line 2)" in msg
    assert "expand it to 490,329,064 values" in msg, msg  # the 9 lists, 9**9 "lol"s...
    assert len(msg) < 400


def test_a_few_levels_of_aliases_stay_allowed():
    text = bomb(3)  # 9**4 + ... = 7,381 values: large but a real file could be
    assert len(load_yaml(text, "ok.yaml")["l3"]) == 9


def test_an_anchor_that_holds_itself_is_refused():
    with pytest.raises(YamlBombError, match=r"self.yaml: .*\*a on line 1.*holds itself"):
        load_yaml("a: &a [1, *a]\n", "self.yaml")


def test_expanded_size_counts_each_alias_as_its_whole_anchor():
    loader = yaml.SafeLoader("a: &a [1, 2]\nb: [*a, *a]\n")
    node = loader.get_single_node()
    loader.dispose()
    # mapping + 2 keys + a (list + 2) + b (list + 2 * 3)
    assert expanded_size(node) == 1 + 2 + 3 + 7
