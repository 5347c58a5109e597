"""The input queue made visible: how long the loop waited for batches (from the train
function's in-graph timestamps) and what tf.data's own model of the running pipeline
(`tf.data.experimental.get_model_proto`, needs autotune on) says about the prefetch
buffer's fill and each stage's processing time. Reading only; the loop decides what to log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

HIGHLY, MODERATELY = 0.20, 0.05  # input-bound fraction thresholds of the verdict


def verdict_for(fraction: float) -> str:
    """The verdict on a run from its input-bound fraction (input wait / wall time)."""
    if fraction >= HIGHLY:
        return "highly input-bound"
    if fraction >= MODERATELY:
        return "moderately input-bound"
    return "not input-bound"


def verdict_range(fractions: list[float]) -> str | None:
    """The boundary statement of a verdict whose per-repeat input-wait fractions straddle a
    threshold, e.g. "between input-bound and not input-bound: 5-14%"; None when every repeat
    gives the same verdict (or there are none)."""
    if not fractions:
        return None
    low, high = min(fractions), max(fractions)
    upper, lower = verdict_for(high), verdict_for(low)
    if upper == lower:
        return None
    # Whether the input sets the pace at all is the question; how much it does, when it
    # straddles "not", is left to the figures: beside two CPU hogs one pipeline's highest
    # repeat read 11% in one run and 22% in the next, flipping the statement's words.
    upper = "input-bound" if lower == "not input-bound" else upper.split()[0]
    return f"between {upper} and {lower}: {percents(low, high)}"


def near_boundary(fractions: list[float], why: str) -> str:
    """The boundary statement of a verdict that `why` leaves open whatever the repeats
    waited (the input may or may not set the pace on this host), with their waits."""
    low, high = min(fractions, default=0.0), max(fractions, default=0.0)
    return f"between input-bound and not input-bound: {percents(low, high)} ({why})"


def percents(low: float, high: float) -> str:
    """'5-14%': a range of fractions as percents."""
    return f"{low:.0%}-{high:.0%}".replace("%-", "-", 1)


@dataclass(frozen=True)
class PipelineStage:
    name: str
    us_per_element: float  # the stage's own processing time per produced element
    elements: int
    parallelism: float | None
    buffered: int


@dataclass(frozen=True)
class PipelineSnapshot:
    """The final prefetch buffer's fill and every stage, outermost first."""

    buffered: int  # elements waiting in the last prefetch buffer
    buffer_size: float | None
    stages: list[PipelineStage] = field(default_factory=list)


def tf_data_iterators(iterator: Any) -> list[Any]:
    """The plain tf.data iterators behind a (possibly distributed) iterator."""
    import tensorflow as tf

    if isinstance(iterator, tf.data.Iterator) and hasattr(iterator, "_iterator_resource"):
        return [iterator]
    found = []
    # Distributed iterators keep one per-worker iterator each with a tf.data iterator inside;
    # these are private attributes, so anything unexpected just yields no snapshot.
    for inner in getattr(iterator, "_iterators", None) or []:
        it = getattr(inner, "_iterator", None)
        if it is not None and hasattr(it, "_iterator_resource"):
            found.append(it)
    return found


def pipeline_snapshot(
    iterator: Any, start: Callable[[Any], int | None] | None = None
) -> PipelineSnapshot | None:
    """None when the pipeline has no model (autotune off, or an unreadable iterator).
    `start(proto)` picks the node to walk from (default: the output); None from it means
    the pipeline it looks for is not in this model (an exhausted iterator's)."""
    import tensorflow as tf

    for it in tf_data_iterators(iterator):
        try:
            proto = tf.data.experimental.get_model_proto(it)
        except Exception:  # noqa: BLE001 - no autotune model, or an unsupported iterator
            continue
        if start is None:
            return snapshot_from_proto(proto)
        node = start(proto)
        return snapshot_from_proto(proto, node) if node is not None else None
    return None


def snapshot_from_proto(proto: Any, start: int | None = None) -> PipelineSnapshot | None:
    """Walks a model_pb2.ModelProto from its output node (or node `start`) down its first
    inputs."""
    nodes = proto.nodes
    if not nodes:
        return None
    node = nodes.get(proto.output if start is None else start)
    stages: list[PipelineStage] = []
    seen = set()
    while node is not None and node.id not in seen:
        seen.add(node.id)
        params = {p.name: p.value for p in node.parameters}
        if node.name != "Root":
            per = node.processing_time / node.num_elements / 1e3 if node.num_elements else 0.0
            par = params.get("parallelism") or params.get("cycle_length")
            stages.append(
                PipelineStage(
                    node.name, per, int(node.num_elements), par, int(node.buffered_elements)
                )
            )
        node = nodes.get(node.inputs[0]) if node.inputs else None
    prefetch = next((s for s in stages if s.name.startswith("Prefetch")), None)
    buffer_size = None
    for n in nodes.values():
        if n.name.startswith("Prefetch"):
            buffer_size = next((p.value for p in n.parameters if p.name == "buffer_size"), None)
            break
    return PipelineSnapshot(prefetch.buffered if prefetch else 0, buffer_size, stages)


def merge_snapshots(old: PipelineSnapshot | None, new: PipelineSnapshot) -> PipelineSnapshot:
    """`new`, with each stage that has produced nothing yet taken from `old` (the same stage
    at the same depth): a repeat that has just restarted its input holds a fresh iterator
    whose stages read 0 us/element, which would hide the slowest stage at epoch ends."""
    if old is None:
        return new
    before = {(i, s.name): s for i, s in enumerate(old.stages)}
    stages = [
        before.get((i, s.name), s) if s.elements == 0 else s for i, s in enumerate(new.stages)
    ]
    return PipelineSnapshot(new.buffered, new.buffer_size, stages)


# A training rate's spread is read over windows of timed calls at least this long: one call
# of a few milliseconds says more about the scheduler than about the run.
WINDOW_S = 1.0
# Windows kept at most: beyond, neighbours merge two by two (a long run's windows widen).
MAX_WINDOWS = 4096
# What the brackets beside a training run's rate and wait say, wherever they are shown.
WINDOWS_NOTE = (
    f"in brackets: the slowest and fastest stretch of {WINDOW_S:.0f} s or more of timed "
    "training calls"
)


def window_span(windows: Sequence[Sequence[float]], of: int) -> tuple[float, float] | None:
    """The least and most of sum `of` per wall second over `windows` of (wall s, wait s,
    examples): of=1 the wait fraction, of=2 examples/s; None below two timed windows."""
    values = [w[of] / w[0] for w in windows if w[0] > 0]
    return (min(values), max(values)) if len(values) > 1 else None


@dataclass
class FeedMeter:
    """Input wait and wall time per loop call; timers skip the compiling first call. The
    calls are also summed in windows of at least WINDOW_S of wall time, whose slowest and
    fastest give the run's rates their spread."""

    wait_s: float = 0.0
    wall_s: float = 0.0
    steps: int = 0
    examples: int = 0  # rows the timed calls trained on (a partial last batch counts its own)
    calls: int = 0
    buffered_sum: float = 0.0
    buffered_n: int = 0
    # Closed windows as [wall s, wait s, examples], then the open one's sums.
    windows: list[list[float]] = field(default_factory=list)
    window_s: float = WINDOW_S
    _open: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def add(self, wait_s: float, wall_s: float, steps: int, examples: int = 0) -> None:
        self.wait_s += wait_s
        self.wall_s += wall_s
        self.steps += steps
        self.examples += examples
        self.calls += 1
        self._open = [self._open[0] + wall_s, self._open[1] + wait_s, self._open[2] + examples]
        if self._open[0] >= self.window_s:
            self.windows.append(self._open)
            self._open = [0.0, 0.0, 0.0]
            if len(self.windows) > MAX_WINDOWS:
                pairs = zip(self.windows[::2], self.windows[1::2], strict=False)
                merged = [[a + b for a, b in zip(x, y, strict=True)] for x, y in pairs]
                self.windows = merged + ([self.windows[-1]] if len(self.windows) % 2 else [])
                self.window_s *= 2

    def _all_windows(self) -> list[list[float]]:
        """The closed windows with the open one added to the last (a short tail would read
        as its own extreme); every timed call is in one, so the run's rate, their
        wall-weighted mean, lies within their slowest and fastest."""
        tail = self._open
        if not self.windows:
            return [tail] if tail[0] > 0 else []
        if tail[0] <= 0:
            return self.windows
        last = [a + b for a, b in zip(self.windows[-1], tail, strict=True)]
        return [*self.windows[:-1], last]

    @property
    def examples_per_s(self) -> float:
        """Rows trained on per second of the timed calls."""
        return self.examples / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def examples_per_s_range(self) -> tuple[float, float] | None:
        """The slowest and fastest window's examples/s (None: fewer than two windows)."""
        return window_span(self._all_windows(), 2)

    @property
    def wait_fraction_range(self) -> tuple[float, float] | None:
        """The least and most input-bound window's wait fraction."""
        return window_span(self._all_windows(), 1)

    def add_buffered(self, buffered: int) -> None:
        self.buffered_sum += buffered
        self.buffered_n += 1

    @property
    def wait_fraction(self) -> float:
        return self.wait_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def wait_ms_mean(self) -> float:
        return 1e3 * self.wait_s / self.steps if self.steps else 0.0

    @property
    def buffered_mean(self) -> float | None:
        return self.buffered_sum / self.buffered_n if self.buffered_n else None
