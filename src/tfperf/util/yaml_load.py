"""YAML a user wrote (a run file, a `--set` value, a schema, a cluster file) read safely:
yaml.safe_load, but aliases (`*name`) that would repeat their anchor's values past
MAX_VALUES are refused before anything is built from them. An alias bomb (anchors nested 8
levels deep, each repeating the one before 9 times) is a few hundred bytes whose values
number in the hundreds of millions: validating or printing it took a minute and GBs.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from tfperf.errors import UserError
from tfperf.util.format import plural

# Values (scalars, lists, mappings) a YAML document may hold once its aliases are expanded:
# far more than any run file or schema, far fewer than would cost seconds to check.
MAX_VALUES = 100_000


class YamlBombError(UserError):
    """A YAML document whose aliases expand past MAX_VALUES, or refer to themselves."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that notes every alias it meets (its name and line) while composing."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self.aliases: list[tuple[str, int]] = []

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            self.aliases.append((event.anchor, event.start_mark.line + 1))
        return super().compose_node(parent, index)


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def expanded_size(node: Node) -> int | None:
    """How many values `node` holds with every alias expanded (an alias repeats its
    anchor's whole subtree), counted once per distinct node; None when a node holds itself."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        key = id(n)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(n))
            continue
        if key in sizes:
            continue
        if key in on_path:
            return None
        on_path.add(key)
        stack.append((n, True))
        for c in _children(n):
            if id(c) in on_path:
                return None
            if id(c) not in sizes:
                stack.append((c, False))
    return sizes[id(node)]


def load_yaml(text: str, where: str) -> Any:
    """safe_load of `text` (from `where`, as messages name it: a file, a --set item),
    refusing aliases that expand past MAX_VALUES values or refer to themselves
    (YamlBombError); a syntax error raises yaml.YAMLError as safe_load does."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if loader.aliases:
            size = expanded_size(node)
            name, line = loader.aliases[0]
            count = plural(len(loader.aliases), "alias", "aliases")
            found = f"found {count} (the first: *{name} on line {line})"
            if size is None:
                raise YamlBombError(
                    f"{where}: expected YAML whose aliases (*name) repeat values written "
                    f"before them, {found} of which one lies inside the anchor it names "
                    f"(a value that holds itself); write the values out"
                )
            if size > MAX_VALUES:
                raise YamlBombError(
                    f"{where}: expected at most {MAX_VALUES:,} values once its YAML aliases "
                    f"(*name) are expanded, {found} that expand it to {size:,} values; "
                    f"refused before expanding them (nested anchors repeat each other)"
                )
        return loader.construct_document(node)
    finally:
        loader.dispose()
