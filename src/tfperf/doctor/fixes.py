"""Measured rewrites of a training pipeline (`tfperf doctor --fix`).

For run-file pipelines a candidate is a run-file change; for any other dataset it is a
rewrite of its graph (batch before a batch-polymorphic map, determinism) or of its options
and tail (map parallelization, prefetch, cache, float32). Candidates are tried one after
another on top of those already kept; each is re-measured with the real train step and
kept only when training gets faster. A rewrite of a dataset is kept only if one epoch
still yields the same multiset of examples.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfperf.doctor import lint
from tfperf.doctor.probes import build_target, measure_cardinality, measure_training
from tfperf.doctor.rules import Diagnosis, _budget, _to_float32

KEEP_GAIN = 1.05  # a change must make training this much faster to be kept (noise margin)
MAX_COMPARE = 20_000  # examples compared for the multiset check


@dataclass
class Trial:
    name: str
    change: str
    examples_per_s: float | None
    kept: bool
    reason: str = ""


@dataclass
class FixResult:
    """Before/after of --fix: each candidate tried, and what was written."""

    before: float
    after: float
    trials: list[Trial]
    written: list[str]
    run_file_changes: dict[str, Any] = field(default_factory=dict)
    pipeline_changes: list[str] = field(default_factory=list)
    dataset: Any = None  # the fixed dataset (other datasets), for callers and tests

    @property
    def speedup(self) -> float:
        return self.after / self.before if self.before else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "before_examples_per_s": round(self.before, 1),
            "after_examples_per_s": round(self.after, 1),
            "speedup": round(self.speedup, 3),
            "trials": [t.__dict__ for t in self.trials],
            "run_file_changes": self.run_file_changes,
            "pipeline_changes": self.pipeline_changes,
            "written": self.written,
        }


def default_output(runfile: str | None, cfg: Any) -> Path:
    if runfile:
        return Path(runfile).with_suffix(".optimized.yaml")
    return Path("doctor.optimized.yaml")


# Run-file keys that hold paths relative to the run file's folder (see RunConfig.resolve).
PATH_KEYS = ("data.dir", "train.out_dir", "train.init_from", "train.cluster",
             "pipeline.cache_records", "pipeline.cache_preprocessed")  # fmt: skip


def relocate_paths(cfg: Any, out: Path) -> Any:
    """A copy of `cfg` whose relative paths name the same files from `out`'s folder: they
    were relative to cfg.source's folder (the working directory for a run file built in
    memory), now they are relative to where the optimized run file is written; absolute
    when the two folders share nothing but the file system's root."""
    import os

    base = Path(cfg.source).parent if cfg.source else Path.cwd()
    folder = Path(out).resolve().parent
    new = cfg.model_copy(deep=True)
    for key in PATH_KEYS:
        section, name = key.split(".")
        value = getattr(getattr(new, section), name)
        if not isinstance(value, str) or not value or Path(value).is_absolute():
            continue  # unset, a flag (cache in RAM), or already absolute
        target = (base / value).resolve()
        try:
            shared = Path(os.path.commonpath([target, folder]))
            moved = (
                str(target) if shared == Path(shared.anchor) else os.path.relpath(target, folder)
            )
        except ValueError:  # another drive (Windows): only an absolute path works
            moved = str(target)
        setattr(getattr(new, section), name, moved)
    new.source = cfg.source
    return new


# ---- multiset of examples ----------------------------------------------------------------
def example_multiset(ds: Any, limit: int = MAX_COMPARE) -> collections.Counter:
    """Each example of `ds` (batches split into rows) as bytes, counted."""
    import numpy as np
    import tensorflow as tf

    counts: collections.Counter = collections.Counter()
    n = 0
    for element in ds:
        flat = [np.asarray(t) for t in tf.nest.flatten(element)]
        rows = flat[0].shape[0] if flat and flat[0].ndim else 1
        batched = all(f.ndim and f.shape[0] == rows for f in flat) and rows >= 1
        for i in range(rows if batched else 1):
            parts = [f[i] if batched else f for f in flat]
            key = b"|".join(_row_bytes(p) for p in parts)
            counts[key] += 1
            n += 1
        if n >= limit:
            break
    return counts


def _row_bytes(value: Any) -> bytes:
    import numpy as np

    if value.dtype.kind == "f":
        # Batched and per-example kernels may differ in the last bits.
        value = np.round(value.astype(np.float64), 5)
    return value.tobytes() + str(value.shape).encode()


def same_examples(a: Any, b: Any) -> bool:
    """True when one pass of `a` and `b` yields the same multiset of examples."""
    return example_multiset(a) == example_multiset(b)


# ---- dataset rewrites -----------------------------------------------------------------
def set_deterministic(graph: lint.DatasetGraph, ds: Any, value: bool) -> Any:
    """`ds` with every op's `deterministic` attribute and the dataset option set to `value`."""
    import tensorflow as tf

    g = copy.deepcopy(graph.graph_def)
    for node in g.node:
        if "deterministic" in node.attr:
            node.attr["deterministic"].s = b"true" if value else b"false"
    out = lint.rebuild(g, ds.element_spec)
    opts = tf.data.Options()
    opts.deterministic = value
    return out.with_options(opts)


def batch_before_map(graph: lint.DatasetGraph, ds: Any) -> tuple[Any, str] | None:
    """Moves the per-example map right before the first batch after it (map(f).batch(n)
    becomes batch(n).map(f)); the caller checks that f gave the same examples on a batch."""
    stages = graph.stages
    for i, st in enumerate(stages[:-1]):
        nxt = stages[i + 1]
        if st.kind == "map" and not st.batched and nxt.kind == "batch" and not st.has_py_func:
            break
    else:
        return None
    g = copy.deepcopy(graph.graph_def)
    nodes = {n.name: n for n in g.node}
    map_node, batch_node = nodes[st.name], nodes[nxt.name]
    source = map_node.input[0]
    consumers = [n for n in g.node if n.input and n.input[0].split(":")[0] == batch_node.name]
    src_node = nodes[source.split(":")[0]]
    src_types = "output_types" if "output_types" in src_node.attr else "Toutput_types"
    drop = lint._const_value(nodes, batch_node.input[-1])
    lead = nxt.batch_size if drop is not None and bool(drop) and nxt.batch_size else -1
    batch_shapes = copy.deepcopy(batch_node.attr["output_shapes"])  # = map's batched output
    # The batch now batches the source's elements: its dtypes and shapes with a batch dim.
    del batch_node.attr["output_types"].list.type[:]
    batch_node.attr["output_types"].list.type.extend(src_node.attr[src_types].list.type)
    del batch_node.attr["output_shapes"].list.shape[:]
    for shape in src_node.attr["output_shapes"].list.shape:
        new = batch_node.attr["output_shapes"].list.shape.add()
        if shape.unknown_rank:
            new.unknown_rank = True
            continue
        new.dim.add().size = lead
        for d in shape.dim:
            new.dim.add().size = d.size
    batch_node.input[0] = source
    map_node.input[0] = batch_node.name
    map_node.attr["output_shapes"].CopyFrom(batch_shapes)
    for c in consumers:
        c.input[0] = map_node.name
    return lint.rebuild(g, ds.element_spec), f"batch before {st.label} (vectorized)"


def with_options(ds: Any, **flags: bool) -> Any:
    import tensorflow as tf

    opts = tf.data.Options()
    if flags.get("map_parallelization"):
        opts.experimental_optimization.map_parallelization = True
    if flags.get("autotune"):
        opts.autotune.enabled = True
    return ds.with_options(opts)


def cache_at(graph: lint.DatasetGraph, ds: Any, stage: lint.Stage) -> Any | None:
    """The prefix up to `stage`, cached in RAM, then the rest when the rest is only
    repeat/prefetch/options (stages that can be re-applied without the graph)."""
    import tensorflow as tf

    rest = [s for s in graph.stages if s.index > stage.index]
    if any(s.kind not in ("repeat", "prefetch", "options") for s in rest):
        return None
    out = lint.prefix_dataset(graph, stage).cache()
    if any(s.kind == "repeat" for s in rest):
        out = out.repeat()
    out = out.prefetch(tf.data.AUTOTUNE)
    variant = tf.data.experimental.to_variant(out)
    return tf.data.experimental.from_variant(variant, ds.element_spec)


# ---- the fixing loop --------------------------------------------------------------------
def _rate(cfg: Any, ds: Any, batch: int, tick: Callable[[str], None], label: str,
          precision: str | None = None) -> float:  # fmt: skip
    import tensorflow as tf

    card = int(tf.data.experimental.cardinality(ds))
    train_ds = ds if card == tf.data.INFINITE_CARDINALITY else ds.repeat()
    target = build_target(cfg, train_ds.element_spec, batch, precision=precision)
    return measure_training(target, train_ds, **_budget(cfg.doctor), tick=tick,
                            label=label).rate.examples_per_s  # fmt: skip


def fix_pipeline(
    cfg: Any, diag: Diagnosis, *, out: Path, tick: Callable[[str], None] | None = None
) -> FixResult:
    """Tries each candidate change, keeps those that help, writes the optimized run file
    (and, for other datasets, a description of the rewritten pipeline)."""
    tick = tick or (lambda label: None)
    if cfg.data.pipeline:
        return _fix_dataset(cfg, diag, out, tick)
    return _fix_run_file(cfg, diag, out, tick)


def run_file_candidates(cfg: Any, diag: Diagnosis) -> list[tuple[str, dict[str, Any]]]:
    """(name, {dotted key: value}) run-file changes worth trying, most promising first."""
    p = cfg.pipeline
    codes = [f.code for f in diag.findings]
    cands: list[tuple[str, dict[str, Any]]] = []
    if cfg.workload and cfg.data.variant == "original":
        cands.append(("tuned pipeline", {"data.variant": "tuned"}))
    if p.parse != "batched":
        cands.append(("batched parse", {"pipeline.parse": "batched"}))
    if p.preprocess_parallelism != "auto":
        cands.append(("parallel preprocessing", {"pipeline.preprocess_parallelism": "auto"}))
    if p.read_parallelism != "auto" or p.interleave_cycle != "auto":
        cands.append(("parallel reads", {"pipeline.read_parallelism": "auto",
                                         "pipeline.interleave_cycle": "auto"}))  # fmt: skip
    if p.prefetch != "auto":
        cands.append(("prefetch", {"pipeline.prefetch": "auto"}))
    if p.deterministic is not False:
        cands.append(("non-deterministic order", {"pipeline.deterministic": False}))
    if not p.cache_records:
        cands.append(("cache records", {"pipeline.cache_records": True}))
    if not p.cache_preprocessed and "no_cache" in codes:
        cands.append(("cache preprocessed", {"pipeline.cache_preprocessed": True}))
    for f in diag.findings:
        if f.code == "precision":
            best = f.change.split(":", 1)[1].split()[0]
            cands.append((f"precision {best}", {"train.precision": best}))
        if f.code == "small_batch":
            cands.append(("larger batch", {"pipeline.batch_size": diag.batch_size * 4}))
    return cands


def _apply(cfg: Any, changes: dict[str, Any]) -> Any:
    from tfperf.config import config_from_dict

    data = cfg.model_dump(mode="json", exclude={"source"})
    new = config_from_dict(data, [f"{k}={_yaml(v)}" for k, v in changes.items()])
    new.source = cfg.source
    return new


def _yaml(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _fix_run_file(cfg: Any, diag: Diagnosis, out: Path, tick: Any) -> FixResult:
    from tfperf.config import dump_config
    from tfperf.inputs.datasets import make_input_dataset

    def measure(c: Any, label: str) -> float:
        ds = make_input_dataset(c, training=True)
        return _rate(c, ds, c.pipeline.batch_size, tick, label)

    best_cfg, best = cfg, measure(cfg, "before")
    before = best
    trials, kept = [], {}
    for name, changes in run_file_candidates(cfg, diag):
        try:
            cand = _apply(best_cfg, changes)
            # Side by side: the best so far re-measured right before the candidate, so that
            # a busy machine's drift does not decide.
            best = measure(best_cfg, "best so far")
            rate = measure(cand, name)
        except Exception as exc:  # noqa: BLE001 - a change that fails is reported, not kept
            trials.append(Trial(name, _describe(changes), None, False, str(exc)[:200]))
            continue
        keep = rate >= best * KEEP_GAIN
        trials.append(Trial(name, _describe(changes), rate, keep,
                            f"{rate / best:.2f}x of the best so far"))  # fmt: skip
        if keep:
            best_cfg, best = cand, rate
            kept.update(changes)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = dump_config(relocate_paths(best_cfg, out))
    out.write_text(_yaml_header(trials, before, best) + text)
    return FixResult(before, best, trials, [str(out)], run_file_changes=kept)


def _describe(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in changes.items())


def _yaml_header(trials: list[Trial], before: float, after: float) -> str:
    lines = [f"# written by `tfperf doctor --fix`: training {before:,.0f} -> {after:,.0f} "
             f"examples/s ({after / max(before, 1e-9):.2f}x)"]  # fmt: skip
    for t in trials:
        rate = "failed" if t.examples_per_s is None else f"{t.examples_per_s:,.0f} ex/s"
        lines.append(f"#   {'kept' if t.kept else 'not kept'}: {t.change} ({rate})")
    return "\n".join(lines) + "\n"


def dataset_candidates(
    graph: lint.DatasetGraph, ds: Any, diag: Diagnosis
) -> list[tuple[str, Callable[[Any, lint.DatasetGraph], Any]]]:
    """(name, rewrite(current dataset, its graph) -> new dataset or None)."""
    import tensorflow as tf

    cands: list[tuple[str, Callable[[Any, lint.DatasetGraph], Any]]] = []
    cands.append(("batch before per-example map",
                  lambda d, g: (batch_before_map(g, d) or (None,))[0]))  # fmt: skip
    parallel = lambda d, g: with_options(d, map_parallelization=True, autotune=True)  # noqa: E731
    cands.append(("map parallelization + autotune", parallel))
    cands.append(("non-deterministic order", lambda d, g: set_deterministic(g, d, False)))
    cands.append(("prefetch at the end", lambda d, g: d.prefetch(tf.data.AUTOTUNE)))
    cache = next((f for f in diag.findings if f.code == "no_cache"), None)
    if cache is not None:
        idx = cache.stage_index

        def add_cache(d: Any, g: lint.DatasetGraph) -> Any:
            stage = next((s for s in g.stages if s.label == cache.stage), None)
            stage = stage or (g.stages[idx] if idx is not None and idx < len(g.stages) else None)
            return cache_at(g, d, stage) if stage is not None else None

        cands.append(("cache the deterministic prefix", add_cache))
    if lint.float64_outputs(graph):
        cast = lambda d, g: d.map(_to_float32, num_parallel_calls=tf.data.AUTOTUNE)  # noqa: E731
        cands.append(("float32 outputs", cast))
    return cands


def _fix_dataset(cfg: Any, diag: Diagnosis, out: Path, tick: Any) -> FixResult:
    from tfperf.config import dump_config
    from tfperf.inputs.datasets import make_input_dataset

    ds = make_input_dataset(cfg, training=True)
    graph = lint.read_graph(ds)
    batch = diag.batch_size
    # The multiset check needs one finite pass without randomness; else it is skipped.
    checkable = measure_cardinality(ds) is not None and not any(s.is_random for s in graph.stages)
    best_ds, best = ds, _rate(cfg, ds, batch, tick, "before")
    before = best
    trials, changes = [], []
    for name, rewrite in dataset_candidates(graph, ds, diag):
        try:
            cand = rewrite(best_ds, lint.read_graph(best_ds))
            if cand is None:
                trials.append(Trial(name, name, None, False, "not applicable"))
                continue
            if checkable and not same_examples(ds, cand):
                trials.append(Trial(name, name, None, False, "changes the examples"))
                continue
            best = _rate(cfg, best_ds, batch, tick, "best so far")  # side by side
            rate = _rate(cfg, cand, batch, tick, name)
        except Exception as exc:  # noqa: BLE001 - e.g. a map that cannot take a batch
            trials.append(Trial(name, name, None, False, f"{type(exc).__name__}: "
                                f"{str(exc).splitlines()[0][:160]}"))  # fmt: skip
            continue
        keep = rate >= best * KEEP_GAIN
        trials.append(Trial(name, name, rate, keep, f"{rate / best:.2f}x of the best so far"))
        if keep:
            best_ds, best = cand, rate
            changes.append(name)
    # Precision is a run-file change that applies to any pipeline (the rewritten one here).
    kept: dict[str, Any] = {}
    best_cfg = cfg
    for name, ch in run_file_candidates(cfg, diag):
        if not all(k.startswith("train.") for k in ch):
            continue
        try:
            cand_cfg = _apply(best_cfg, ch)
            best = _rate(best_cfg, best_ds, batch, tick, "best so far")
            rate = _rate(cand_cfg, best_ds, batch, tick, name)
        except Exception as exc:  # noqa: BLE001
            trials.append(Trial(name, _describe(ch), None, False, str(exc)[:200]))
            continue
        keep = rate >= best * KEEP_GAIN
        trials.append(Trial(name, _describe(ch), rate, keep, f"{rate / best:.2f}x"))
        if keep:
            best_cfg, best = cand_cfg, rate
            kept.update(ch)
    written = []
    md = out.with_name(out.name.removesuffix(".yaml") + ".md")
    md.parent.mkdir(parents=True, exist_ok=True)
    md.write_text(describe_rewrite(cfg, graph, lint.read_graph(best_ds), changes, trials,
                                   before, best))  # fmt: skip
    written.append(str(md))
    if kept:
        text = dump_config(relocate_paths(best_cfg, out))
        out.write_text(_yaml_header(trials, before, best) + text)
        written.append(str(out))
    return FixResult(before, best, trials, written, kept, changes, dataset=best_ds)


def describe_rewrite(cfg: Any, before: lint.DatasetGraph, after: lint.DatasetGraph,
                     changes: list[str], trials: list[Trial], rate0: float,
                     rate1: float) -> str:  # fmt: skip
    """Markdown: the pipeline before and after, the options applied, the trials."""
    lines = [f"# `tfperf doctor --fix`: {cfg.data.pipeline}", "",
             f"Training: {rate0:,.0f} -> {rate1:,.0f} examples/s "
             f"({rate1 / max(rate0, 1e-9):.2f}x).", "",
             "Before: " + " -> ".join(s.label for s in before.stages), "",
             "After: " + " -> ".join(s.label for s in after.stages), "",
             "Changes kept: " + (", ".join(changes) or "none"), "",
             "| change | examples/s | kept | note |", "|---|---:|---|---|"]  # fmt: skip
    for t in trials:
        rate = "-" if t.examples_per_s is None else f"{t.examples_per_s:,.0f}"
        lines.append(f"| {t.change} | {rate} | {'yes' if t.kept else 'no'} | {t.reason} |")
    lines += ["", "Apply them in the pipeline's code: move per-example maps after batch(), "
              "pass num_parallel_calls=tf.data.AUTOTUNE, end with prefetch(AUTOTUNE), set "
              "tf.data.Options().deterministic = False for training, as kept above."]  # fmt: skip
    return "\n".join(lines) + "\n"
