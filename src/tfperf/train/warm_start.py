"""Warm start (reusing a pretrained model): load the variables of the layers a new
model shares with a source, matched by layer name, and freeze chosen layers.

Sources: a checkpoint written by tfperf's loop (a run dir, its checkpoints/ dir or a
ckpt-N prefix), a Keras 3 `.weights.h5`, a legacy Keras 2 `.h5`, or a `.keras` file.
This module only reads sources and assigns variables; the loop decides when to call it.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tfperf.errors import UserError
from tfperf.util.format import quoted

if TYPE_CHECKING:
    import keras
    from rich.table import Table

# Key of the object graph inside every tf.train checkpoint.
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


class WarmStartError(UserError):
    """An init_from source or freeze list that cannot be used; the message says which."""


@dataclass(frozen=True)
class Mismatch:
    """A layer present on both sides whose variables differ in count or shape."""

    layer: str
    source_shapes: list[tuple[int, ...]]
    model_shapes: list[tuple[int, ...]]


@dataclass
class WarmStartReport:
    """What warm_start did, layer by layer; prints as a rich table."""

    source: str
    kind: str  # checkpoint | keras | h5
    loaded: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the new model, not in the source
    unused: list[str] = field(default_factory=list)  # in the source, not in the new model
    mismatched: list[Mismatch] = field(default_factory=list)
    frozen: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "loaded": self.loaded,
            "missing": self.missing,
            "unused": self.unused,
            "mismatched": [
                {
                    "layer": m.layer,
                    "source_shapes": [list(s) for s in m.source_shapes],
                    "model_shapes": [list(s) for s in m.model_shapes],
                }
                for m in self.mismatched
            ],
            "frozen": self.frozen,
        }

    def table(self) -> Table:
        from rich.table import Table

        t = Table(title=f"warm start from {self.source} ({self.kind})")
        t.add_column("layer")
        t.add_column("status")
        t.add_column("detail")
        for name in self.loaded:
            t.add_row(name, "[green]loaded[/]", "frozen" if name in self.frozen else "")
        for m in self.mismatched:
            detail = f"source {_fmt_shapes(m.source_shapes)} vs model {_fmt_shapes(m.model_shapes)}"
            t.add_row(m.layer, "[red]shape mismatch[/]", detail)
        for name in self.missing:
            t.add_row(name, "[yellow]missing[/]", "not in the source: keeps its initial values")
        for name in self.unused:
            t.add_row(name, "[dim]unused[/]", "in the source only")
        for name in self.frozen:
            if name not in self.loaded:
                t.add_row(name, "frozen", "trainable=False")
        return t

    def __rich__(self) -> Table:
        return self.table()


def _fmt_shapes(shapes: Sequence[tuple[int, ...]]) -> str:
    return ", ".join(str(tuple(s)) for s in shapes)


# ---- the new model's side -------------------------------------------------------------


def _all_layers(model: keras.Model) -> list[Any]:
    """Every layer inside the model, nested ones included, in tracking order."""
    return list(model._flatten_layers(include_self=False, recursive=True))


def _own_variables(layer: Any) -> list[Any]:
    # Keras saves a layer's own variables in this order (Layer.save_own_variables), so h5
    # sources can be matched by index; sublayers' variables belong to the sublayers.
    return list(layer._trainable_variables) + list(layer._non_trainable_variables)


def _model_groups(model: keras.Model, by: str) -> dict[str, list[Any]]:
    """Layer key -> own variables. by='name': the layer's name (h5 and .keras sources);
    by='path': the variables' path prefix, exactly what checkpoints record."""
    groups: dict[str, list[Any]] = {}
    for layer in _all_layers(model):
        own = _own_variables(layer)
        if not own:
            continue
        key = layer.name if by == "name" else own[0].path.rpartition("/")[0] or layer.name
        groups.setdefault(key, own)  # a duplicate key keeps the first layer
    return groups


# ---- the source's side ------------------------------------------------------------------


@dataclass
class _SourceLayer:
    name: str
    values: list[tuple[str, np.ndarray]]  # (variable name or index, value), in saved order


def resolve_checkpoint(path: str | Path) -> str | None:
    """A ckpt prefix from a run dir, a checkpoints/ dir or a prefix; None if there is none."""
    import tensorflow as tf

    p = Path(path)
    if Path(f"{p}.index").exists():
        return str(p)
    for d in (p / "checkpoints", p):
        if d.is_dir() and (d / "checkpoint").exists():
            latest = tf.train.latest_checkpoint(str(d))
            if latest:
                return latest
    return None


def read_checkpoint_variables(prefix: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """The model's variables in a loop checkpoint: path (e.g. 'A/kernel') -> (tensor key,
    shape), found by walking the object graph below the root's `model` child."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(prefix)
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
    shapes = reader.get_variable_to_shape_map()
    root = graph.nodes[0]
    # The loop saves Checkpoint(model=..., ...); a bare model checkpoint has no 'model' child.
    start = next((c.node_id for c in root.children if c.local_name == "model"), 0)
    out: dict[str, tuple[str, tuple[int, ...]]] = {}
    todo, seen = [(start, "model")], set()
    while todo:
        node_id, local_path = todo.pop(0)
        if node_id in seen:
            continue
        seen.add(node_id)
        node = graph.nodes[node_id]
        for attr in node.attributes:
            if attr.name == "VARIABLE_VALUE" and attr.checkpoint_key in shapes:
                # full_name is the Keras variable path ('A/kernel'), i.e. layer name + var
                name = attr.full_name or local_path
                out.setdefault(name, (attr.checkpoint_key, tuple(shapes[attr.checkpoint_key])))
        for child in node.children:
            todo.append((child.node_id, f"{local_path}/{child.local_name}"))
    return out


def _checkpoint_layers(prefix: str) -> list[_SourceLayer]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    layers: dict[str, _SourceLayer] = {}
    for path, (key, _shape) in read_checkpoint_variables(prefix).items():
        layer, _, var = path.rpartition("/")
        entry = layers.setdefault(layer or path, _SourceLayer(layer or path, []))
        entry.values.append((var, np.asarray(reader.get_tensor(key))))
    return list(layers.values())


def _h5_layers(h5: Any) -> list[_SourceLayer]:
    """Layers of a Keras 3 weights file: every `vars` group that holds values. Keras 3.x
    records the layer's name as the group's 'name' attribute; older files fall back to
    the structural path (class name and position, e.g. layers/dense_1)."""
    if "layer_names" in h5.attrs or "model_weights" in h5:
        return _legacy_h5_layers(h5["model_weights"] if "model_weights" in h5 else h5)
    out: list[_SourceLayer] = []

    def visit(name: str, obj: Any) -> None:
        if not name.endswith("vars") or not hasattr(obj, "keys") or not len(obj):
            return
        keys = sorted(obj.keys(), key=lambda k: int(k) if k.isdigit() else 1 << 30)
        label = obj.attrs.get("name")
        label = label.decode() if isinstance(label, bytes) else label
        parent = name.rpartition("/")[0] or "(model)"
        out.append(_SourceLayer(str(label or parent), [(k, np.asarray(obj[k])) for k in keys]))

    h5.visititems(visit)
    return out


def _legacy_h5_layers(group: Any) -> list[_SourceLayer]:
    """Keras 2 h5 files: layer_names and weight_names attributes name everything."""

    def names(attr: Any) -> list[str]:
        return [n.decode() if isinstance(n, bytes) else str(n) for n in attr]

    out = []
    for layer in names(group.attrs.get("layer_names", [])):
        g = group[layer]
        weights = names(g.attrs.get("weight_names", []))
        if weights:
            out.append(_SourceLayer(layer, [(w, np.asarray(g[w])) for w in weights]))
    return out


def read_source(path: str | Path) -> tuple[str, list[_SourceLayer]]:
    """(kind, layers) of an init_from source, or a WarmStartError naming the path."""
    p = Path(path)
    name = p.name
    if name.endswith(".keras"):
        import h5py

        if not p.is_file():
            raise WarmStartError(f"train.init_from: no such file {p}")
        with zipfile.ZipFile(p) as z:
            if "model.weights.h5" not in z.namelist():
                raise WarmStartError(f"train.init_from: {p} has no model.weights.h5 inside")
            data = io.BytesIO(z.read("model.weights.h5"))
        with h5py.File(data, "r") as h5:
            return "keras", _h5_layers(h5)
    if name.endswith(".h5"):
        import h5py

        if not p.is_file():
            raise WarmStartError(f"train.init_from: no such file {p}")
        with h5py.File(p, "r") as h5:
            return "h5", _h5_layers(h5)
    prefix = resolve_checkpoint(p)
    if prefix is None:
        raise WarmStartError(
            f"train.init_from: expected a run dir, a checkpoints dir, a ckpt-N prefix, a "
            f".weights.h5 or a .keras file, found {p!s} (nothing to load there)"
        )
    return "checkpoint", _checkpoint_layers(prefix)


# ---- matching and loading ---------------------------------------------------------------


def _match_values(source: _SourceLayer, own: list[Any], by_name: bool) -> list[np.ndarray] | None:
    """Source values in the order of `own`, or None when they do not line up."""
    if len(source.values) != len(own):
        return None
    if by_name:
        table = dict(source.values)
        names = [v.path.rpartition("/")[2] for v in own]
        if set(names) == set(table):
            return [table[n] for n in names]
        return None
    return [value for _, value in source.values]


def warm_start(model: keras.Model, path: str | Path, freeze: Sequence[str] = ()) -> WarmStartReport:
    """Loads the variables of the layers `model` shares with the source at `path`
    (matched by layer name; shapes must agree), then freezes the layers in `freeze`."""
    if not model.weights:
        raise WarmStartError("train.init_from: the model has no variables yet; build it first")
    kind, source = read_source(path)
    # Checkpoints record each variable's full path, h5 files each layer's name.
    by = "path" if kind == "checkpoint" else "name"
    groups = _model_groups(model, by)
    source_by_key: dict[str, _SourceLayer] = {}
    for s in source:
        source_by_key.setdefault(s.name, s)
    report = WarmStartReport(source=str(path), kind=kind)
    for key, own in groups.items():
        src = source_by_key.get(key)
        if src is None:
            report.missing.append(key)
            continue
        values = _match_values(src, own, by_name=kind == "checkpoint")
        model_shapes = [tuple(v.shape) for v in own]
        if values is None or any(
            tuple(a.shape) != s for a, s in zip(values, model_shapes, strict=True)
        ):
            src_shapes = [tuple(a.shape) for _, a in src.values]
            report.mismatched.append(Mismatch(key, src_shapes, model_shapes))
            continue
        for var, value in zip(own, values, strict=True):
            var.assign(value.astype(var.dtype))
        report.loaded.append(key)
    report.unused = [s.name for s in source if s.name not in groups]
    report.frozen = freeze_layers(model, freeze)
    return report


def freeze_layers(model: keras.Model, names: Iterable[str]) -> list[str]:
    """Sets trainable=False on the named layers (nested ones too); an unknown name is an
    error listing the model's layers. Returns the names frozen."""
    names = list(names)
    if not names:
        return []
    layers = {layer.name: layer for layer in _all_layers(model)}
    unknown = [n for n in names if n not in layers]
    if unknown:
        raise WarmStartError(
            f"train.freeze: no layer named {quoted(unknown[0])} in the model; "
            f"expected one of {sorted(layers)}"
        )
    for n in names:
        layers[n].trainable = False
    return names
