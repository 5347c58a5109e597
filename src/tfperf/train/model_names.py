"""The names of a model and its layers checked against what TensorFlow accepts as scope
names, before anything is traced: a model named `model<x>` otherwise stops the first
compiled step with a 27-frame traceback ("is not a valid root scope name").
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tfperf.errors import UserError
from tfperf.util.format import quoted

if TYPE_CHECKING:
    import keras

# TensorFlow's own patterns (tensorflow/python/framework/ops.py): the outermost scope (the
# model's name) and the scopes inside it (its layers').
ROOT_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*")
INNER_NAME = re.compile(r"[A-Za-z0-9_.\\/>-]*")
ALLOWED = "letters, digits and the characters _ . - > / \\"


class ModelNameError(UserError):
    """A model or layer whose name TensorFlow refuses as a scope name."""


def _bad_chars(name: str, pattern: re.Pattern[str]) -> str:
    bad = sorted({c for c in name if not INNER_NAME.fullmatch(c)})
    if bad:
        return "".join(bad)
    return name[:1] if not pattern.fullmatch(name) else ""  # a root name's first character


def _layers(model: keras.Model) -> list[keras.Layer]:
    flatten = getattr(model, "_flatten_layers", None)  # nested models' layers too
    if callable(flatten):
        return list(flatten(include_self=False, recursive=True))
    return list(getattr(model, "layers", []))


def check_names(model: keras.Model, where: str) -> None:
    """ModelNameError naming the model or the first layer whose name TensorFlow refuses
    as a scope name, the characters it allows and how to rename it; `where` is how
    messages name the model's origin (e.g. "model.name my_model:build")."""
    name = str(getattr(model, "name", "") or "")
    if name and not ROOT_NAME.fullmatch(name):
        raise ModelNameError(
            f"{where}: the model is named {quoted(name)}, which TensorFlow refuses as a scope "
            f"name: expected {ALLOWED}, starting with a letter, digit or '.', found "
            f"{quoted(_bad_chars(name, ROOT_NAME))}; rename it (keras.Model(..., name=...))"
        )
    for layer in _layers(model):
        lname = str(getattr(layer, "name", "") or "")
        if not INNER_NAME.fullmatch(lname):
            raise ModelNameError(
                f"{where}: layer {quoted(lname)} ({type(layer).__name__}) of model "
                f"{quoted(name)} has a name TensorFlow refuses as a scope name: expected "
                f"{ALLOWED}, found {quoted(_bad_chars(lname, INNER_NAME))}; rename it (the "
                f"layer's name=...)"
            )
