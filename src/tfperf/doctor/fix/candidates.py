"""The candidates of `tfperf doctor --fix` on any tf.data.Dataset: the graph rewrites
(rewrites/) that apply to it, by the labels the rules give them (rules/: each `Rewrite`
names the rule whose change it makes), in the order dataset.py tries them. Also what
`tfperf.apply_rewrites` looks kept names up in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from tfperf.doctor.evidence.evidence import cpu_count
from tfperf.doctor.evidence.findings import Diagnosis
from tfperf.doctor.fix.trials import Skipped
from tfperf.doctor.graph import lint
from tfperf.doctor.probes.bounded import cache_budget_bytes
from tfperf.doctor.probes.budget import FIX_CLOCK
from tfperf.doctor.rewrites.cache import (
    FILL_SECONDS,
    cache_work,
    cacheable_prefix,
    early_caches,
)
from tfperf.doctor.rewrites.csv_batched import batched_csv, find_csv
from tfperf.doctor.rewrites.edits import (
    batch_before_map,
    set_deterministic,
    to_float32,
    with_options,
)
from tfperf.doctor.rewrites.fission import split_maps, split_site
from tfperf.doctor.rewrites.flat_slices import map_then_unbatch, slice_flat_maps
from tfperf.doctor.rewrites.floats import float32_at_source, float64_constants
from tfperf.doctor.rewrites.gather import batched_gather, find_site
from tfperf.doctor.rewrites.io import (
    cache_before_random,
    cap_shuffles,
    parallel_batch,
    parallel_maps,
    parallel_reads,
    random_before_cache,
)
from tfperf.doctor.rewrites.parse_batched import parse_per_batch, parse_sites
from tfperf.doctor.rewrites.pfor_fn import Refused
from tfperf.doctor.rewrites.shuffle_early import early_site, shuffle_before_maps
from tfperf.doctor.rewrites.vectorize import vectorize_maps
from tfperf.doctor.rules import PREDICTED_BY, Rewrite
from tfperf.doctor.rules.cache import CACHE_PREFIX, MOVE_CACHE
from tfperf.doctor.rules.csv_rows import CSV_BATCHED
from tfperf.doctor.rules.floats import FLOAT32_SOURCE
from tfperf.doctor.rules.gather import GATHER
from tfperf.doctor.rules.parallel import (
    FLAT_MAP_SLICES,
    MAP_OPTIONS,
    NONDETERMINISTIC,
    PARALLEL_MAPS,
    PARALLEL_READS,
)
from tfperf.doctor.rules.per_example import BATCH_FIRST, FISSION, PARSE_PER_BATCH, VECTORIZE
from tfperf.doctor.rules.pipeline_end import FLOAT32, PREFETCH_END
from tfperf.doctor.rules.ram import CAP_SHUFFLE
from tfperf.doctor.rules.shuffle_early import SHUFFLE_EARLY
from tfperf.doctor.rules.threads import INPUT_THREADS, threads_variant
from tfperf.inputs.datasets import with_input_threads

if TYPE_CHECKING:
    import tensorflow as tf

# (dataset, its graph) -> dataset or None
DatasetRewrite: TypeAlias = "Callable[[tf.data.Dataset, lint.DatasetGraph], tf.data.Dataset | None]"
# A rewrite no rule asks for (no finding names a sequential batch): its label and code edit.
PARALLEL_BATCH = Rewrite(
    "parallel batch", "pass num_parallel_calls=tf.data.AUTOTUNE to .batch()", at="batch"
)


def default_budget() -> int:
    """The RAM budget of a dataset handed without a run file: pipeline.shuffle_ram_mb's
    default, at most half the free RAM (bounded.ram_budget_bytes with the defaults)."""
    import psutil

    from tfperf.config import PipelineConfig

    default_mb = PipelineConfig().shuffle_ram_mb
    return int(min(default_mb * 2**20, psutil.virtual_memory().available / 2))


def dataset_candidates(
    graph: lint.DatasetGraph,
    ds: tf.data.Dataset,
    diag: Diagnosis | None,
    *,
    trial: bool = True,
) -> list[tuple[str, DatasetRewrite]]:
    """(name, rewrite(current dataset, its graph) -> new dataset or None). Without a
    diagnosis (`tfperf.apply_rewrites` replaying kept names) each is offered where it
    applies: the cache after the deterministic prefix, the float32 cast on float64 outputs.
    With a diagnosis and `trial`, what a timed trial needs is built too, such as the cache's
    sample (FILL_SECONDS); a replay of kept names (trial=False) builds the rewrites alone."""
    # TensorFlow is imported on first use so that `import tfperf.doctor` stays fast.
    import tensorflow as tf

    def batch_first(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        return (batch_before_map(g, d) or (None,))[0]

    def parallel(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        if _options_already_on(d, g):
            return None
        # tf.data's option leaves stateful maps (Python, random ops) sequential.
        return _noted(with_options(d, **_OPTIONS), g, d, stateless_only=True)

    def nondeterministic(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        # No parallel stage keeps its order: the rewrite would change nothing.
        return set_deterministic(g, d, False) if lint.deterministic_stages(g) else None

    def prefetch(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        return None if _ends_in_autotuned_prefetch(g) else d.prefetch(tf.data.AUTOTUNE)

    def vectorized(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        result = vectorize_maps(g, d)
        notes = "; ".join(f"{label} stays per-example: {why}" for label, why in result.fallbacks)
        if result.dataset is not None and not result.done:
            # Only the fallback applied (the maps made parallel): that is no vectorizing, and
            # the parallel-map candidates try it under their own name.
            raise Skipped(f"nothing vectorized: {notes}")
        if result.dataset is None and notes:
            raise Skipped(notes)
        if result.dataset is not None:
            result.dataset.doctor_note = notes
        return result.dataset

    def split(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        try:
            return split_maps(g, d)
        except Refused as why:
            raise Skipped(f"not split: {why}") from None

    def parsed_per_batch(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        try:
            return parse_per_batch(g, d)
        except Refused as why:
            raise Skipped(f"not parsed per batch: {why}") from None

    cands: list[tuple[str, DatasetRewrite]] = []
    # The sources themselves change first, before any map: examples cut from in-memory
    # arrays, CSV rows parsed one at a time.
    if find_site(graph) is not None:
        cands.append((GATHER.label, lambda d, g: batched_gather(g, d)))
    if find_csv(graph) is not None:
        cands.append((CSV_BATCHED.label, lambda d, g: batched_csv(g, d)))
    cands.append((VECTORIZE.label, vectorized))
    # pfor's vectorized f first; moving f itself after batch is right only when f happens
    # to take a batch, and is tried on what vectorizing left per-example. Before the split:
    # a map pfor refuses for a table lookup may take a batch whole (8.5x on a MovieLens
    # pipeline, where the split, tried first, kept 1.4x and left nothing to move).
    cands.append((BATCH_FIRST.label, batch_first))
    if split_site(graph) is not None:
        # A map pfor refuses for one op (a decode): the ops after it vectorized on their own.
        cands.append((FISSION.label, split))
    if parse_sites(graph):
        # Variable-length features parsed before a padded_batch or a bucketing: the parse
        # per batch, the examples unbatched as they were.
        cands.append((PARSE_PER_BATCH.label, parsed_per_batch))
    cands += [
        (MAP_OPTIONS.label, parallel),
        (NONDETERMINISTIC.label, nondeterministic),
        (PREFETCH_END.label, prefetch),
    ]
    # Graph edits: parallel reads, maps (py_function too) and batch; shuffle cap; cache move.
    cands += _graph_edits(graph)
    # Tried whenever the graph has deterministic work to cache (decode, parse, read), with
    # or without a finding: the trial measures it, and cache_work leaves it out beyond the
    # RAM budget. In RAM; a source shuffle (list_files) moves after the cache.
    # A cache already there counts only when the prefix's cache would replace it (a cache of
    # records before their parse).
    caches = {s.index for s in graph.stages if s.kind == "cache"}
    cacheable = caches <= {s.index for s in early_caches(graph)} and any(
        s.kind in ("map", "parse", "read") for s in cacheable_prefix(graph)
    )
    cache = next((f for f in diag.findings if f.code == "no_cache"), None) if diag else None
    if cache is not None or diag is None or cacheable:
        # A trial times the cache filled (a sample where a whole epoch takes long); a replay
        # builds it alone.
        fill = FILL_SECONDS if diag is not None and trial else None
        add_cache = lambda d, g: cache_work(g, d, cache_budget_bytes(), fill)  # noqa: E731
        cands.append((CACHE_PREFIX.label, add_cache))
    if lint.float64_outputs(graph) or float64_constants(graph.graph_def):
        # Computed in float32 from the float64 arrays on; else cast at the output.
        source = lambda d, g: float32_at_source(g, d)  # noqa: E731
        cands.append((FLOAT32_SOURCE.label, source))
    if lint.float64_outputs(graph):

        def cast(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
            if not lint.float64_outputs(g):
                return None  # already float32 (at the source)
            return d.map(to_float32, num_parallel_calls=tf.data.AUTOTUNE)

        cands.append((FLOAT32.label, cast))
    threads = threads_variant(diag.variants) if diag else None
    if diag is None or (threads and any(f.code == "input_threads" for f in diag.findings)):
        # The input on its own pool, as the diagnosis timed it (replayed: half the cores,
        # as the doctor times it).
        n = threads[1] if threads else max(1, cpu_count() // 2)
        cands.append((INPUT_THREADS.label, lambda d, g: with_input_threads(d, n)))
    if diag is None:  # a replay: the kept names' order, nothing timed
        return cands
    return [(name, announced(name, rw)) for name, rw in by_gain(cands, diag)]


# Rewrites of the source itself: tried first whatever their gain, since the maps' rewrites
# after them read the graph they leave (a gather per batch replaces the per-row slices).
SOURCES = frozenset({GATHER.label, CSV_BATCHED.label})
# Each must be tried after the one named: batch_first moves what vectorizing left.
AFTER = {BATCH_FIRST.label: VECTORIZE.label}
# Vectorizing (or splitting) a per-example map removes its per-call work: the largest lever
# tf.data has (7x on the README's example, where parallel maps gave 1.24x and a prefetch
# nothing). When no finding predicts its gain (the diagnosis had no time to cost the map's
# stage), it is ranked with the best of the other candidates, and before them: a small
# budget once ran out on map parallelization, once on a prefetch, the vectorizing never
# timed. Where nothing is vectorizable it is skipped at the cost of one trace; moving the map
# after the batch comes right after it (AFTER), before the split.
UNPREDICTED_FIRST = (VECTORIZE.label, BATCH_FIRST.label, FISSION.label)


def predicted_gain(label: str, diag: Diagnosis) -> float:
    """The largest expected gain among the findings whose change candidate `label` makes
    (PREDICTED_BY); 1.0 when no finding asks for it (tried for what the trial measures)."""
    codes = set(PREDICTED_BY.get(label, ()))
    gains = [f.expected_speedup for f in diag.findings if f.code in codes and f.expected_speedup]
    return max(gains, default=1.0)


def _predicted(label: str, diag: Diagnosis) -> bool:
    """Whether a finding of the diagnosis predicts candidate `label`'s gain."""
    codes = set(PREDICTED_BY.get(label, ()))
    return any(f.code in codes and f.expected_speedup for f in diag.findings)


def ranking_gains(names: list[str], diag: Diagnosis) -> dict[str, float]:
    """The gain each candidate is ranked by: its predicted gain, raised for an unpredicted
    vectorize (UNPREDICTED_FIRST) and capped for one that follows another (AFTER)."""
    gain = {name: predicted_gain(name, diag) for name in names}
    best = max(gain.values(), default=1.0)
    for first in UNPREDICTED_FIRST:
        if first in gain and not _predicted(first, diag):
            gain[first] = best
    for later, first in AFTER.items():  # never ahead of the candidate it follows
        if later in gain and first in gain:
            gain[later] = min(gain[later], gain[first])
    return gain


def by_gain(
    cands: list[tuple[str, DatasetRewrite]], diag: Diagnosis
) -> list[tuple[str, DatasetRewrite]]:
    """`cands` best first: the source rewrites, then by ranking gain (the budget is spent
    in this order, so a deadline cuts the least promising); ties keep their listed order."""
    gain = ranking_gains([name for name, _ in cands], diag)
    return sorted(cands, key=lambda c: (c[0] not in SOURCES, -gain[c[0]]))


def announced(name: str, rewrite: DatasetRewrite) -> DatasetRewrite:
    """`rewrite`, saying on the progress display that candidate `name` is being built and
    checked (its multiset check follows the rewrite) and the seconds left."""

    def run(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
        clock = FIX_CLOCK.get()
        if clock is not None and clock.budget.on_probe is not None:
            clock.budget.on_probe(f"checking {name}", clock.budget.left())
        return rewrite(d, g)

    return run


# A candidate that would change nothing is not applicable: timing a no-op lets the noise
# decide, and takes a trial's share of the budget.
_OPTIONS = {"map_parallelization": True, "autotune": True}


def _options_already_on(ds: tf.data.Dataset, graph: lint.DatasetGraph) -> bool:
    """Map parallelization has no sequential map to act on (or is on) and autotune is on."""
    opts = ds.options()
    idle = opts.experimental_optimization.map_parallelization or not any(
        s.op == "MapDataset" for s in graph.stages
    )
    return bool(idle) and opts.autotune.enabled is not False


def _ends_in_autotuned_prefetch(graph: lint.DatasetGraph) -> bool:
    last = [s for s in graph.stages if s.kind != "options"][-1:]
    return bool(last) and last[0].kind == "prefetch" and last[0].buffer_size == lint.AUTOTUNE


def _noted(
    out: tf.data.Dataset | None,
    graph: lint.DatasetGraph,
    ds: tf.data.Dataset,
    *,
    stateless_only: bool = False,
) -> tf.data.Dataset | None:
    """`out` (a rewrite that makes maps parallel) with a note naming each per-example map
    the vectorizer refused and why ("parallel map#2: the vectorizer failed: ..."), so the
    report says what really applied (pfor's traces are remembered: no second trace).
    `stateless_only`: the rewrite leaves maps with Python or random ops sequential."""
    if out is None:
        return None
    try:
        refused = vectorize_maps(graph, ds).fallbacks
    except Exception:  # noqa: BLE001 - a function pfor cannot even load: no note
        refused = []
    stateful = {s.label for s in graph.stages if s.has_py_func or s.is_random}
    notes = [
        f"parallel {label.split(' (')[0]}: "
        + ("not vectorized" if why.startswith("it comes before") else "the vectorizer failed")
        + f": {why}"
        for label, why in refused
        if not (stateless_only and label in stateful)
    ]
    if notes:
        out.doctor_note = "; ".join(notes)
    return out


def _graph_edits(
    graph: lint.DatasetGraph, budget: int | None = None
) -> list[tuple[str, DatasetRewrite]]:
    """(name, rewrite(dataset, graph) -> dataset or None) of rewrites/io.py's graph edits
    that apply to `graph`; `budget`: bytes a shuffle buffer or cache may hold."""
    ram = budget if budget is not None else default_budget()
    out: list[tuple[str, DatasetRewrite]] = []
    if any(s.reads_files and s.kind in ("flat_map", "interleave") for s in graph.stages):
        out.append((PARALLEL_READS.label, lambda d, g: parallel_reads(g, d)))
    if any(s.op == "MapDataset" for s in graph.stages):
        out.append((PARALLEL_MAPS.label, lambda d, g: _noted(parallel_maps(g, d), g, d)))
    if slice_flat_maps(graph):
        out.append((FLAT_MAP_SLICES.label, lambda d, g: map_then_unbatch(g, d)))
    if any(s.op == "BatchDatasetV2" for s in graph.stages):
        out.append((PARALLEL_BATCH.label, lambda d, g: parallel_batch(g, d)))
    if any(s.kind == "shuffle" for s in graph.stages):

        def cap(d: tf.data.Dataset, g: lint.DatasetGraph) -> tf.data.Dataset | None:
            capped, caps = cap_shuffles(g, d, ram)
            return capped if caps else None

        out.append((CAP_SHUFFLE.label, cap))
    if early_site(graph) is not None:
        out.append((SHUFFLE_EARLY.label, lambda d, g: shuffle_before_maps(g, d)))
    if random_before_cache(graph) is not None:
        move = lambda d, g: cache_before_random(g, d, ram)  # noqa: E731
        out.append((MOVE_CACHE.label, move))
    return out
