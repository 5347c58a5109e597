"""The examples of a dataset as a multiset: each element split into its rows when it is a
batch, each row keyed by a digest of its values, so that two pipelines can be checked to
yield the same examples in any order and batching. The doctor's --fix keeps a rewrite only
when this check passes; `tfperf.testing.assert_same_examples` shows its differences.
"""

from __future__ import annotations

import collections
import collections.abc
import hashlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import tensorflow as tf

MAX_COMPARE = 20_000  # examples the doctor compares for its multiset check
SHOW = 3  # differing examples shown per side in a message
_WIDTH = 160  # characters of one shown example

Row = list[tuple[str, Any]]  # one example: (feature name, numpy value or nested list)


def named_leaves(element: Any, path: str = "") -> list[tuple[str, Any]]:
    """The tensors of a dataset element with readable names: dict keys ('image'), tuple
    positions ('[0]/image', '[1]'), namedtuple fields; a bare tensor is 'element'."""
    if isinstance(element, dict):
        return [
            leaf
            for k in sorted(element, key=str)  # tf.nest orders dict keys the same way
            for leaf in named_leaves(element[k], f"{path}/{k}" if path else str(k))
        ]
    if isinstance(element, tuple) and hasattr(element, "_fields"):
        return [
            leaf
            for k in element._fields
            for leaf in named_leaves(getattr(element, k), f"{path}/{k}" if path else k)
        ]
    if isinstance(element, (tuple, list)):
        return [leaf for i, v in enumerate(element) for leaf in named_leaves(v, f"{path}[{i}]")]
    return [(path or "element", element)]


def to_value(t: Any) -> Any:
    """A tensor as numpy; a ragged tensor (or a 2-D sparse one, as ragged) as nested lists."""
    import numpy as np
    import tensorflow as tf

    if isinstance(t, tf.SparseTensor):
        t = tf.RaggedTensor.from_sparse(t) if t.shape.rank == 2 else tf.sparse.to_dense(t)
    if isinstance(t, tf.RaggedTensor):
        return t.to_list()
    return np.asarray(t)


def _leading(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    return int(value.shape[0]) if value.ndim else None


def element_rows(element: Any, batched: bool | None = None) -> list[Row]:
    """The examples in one element. `batched`: True splits the leading dimension of every
    tensor into rows, False keeps the element whole, None splits only when every tensor has
    the same leading dimension (a batch) and keeps scalars and mixed shapes whole."""
    leaves = [(name, to_value(t)) for name, t in named_leaves(element)]
    dims = {_leading(v) for _, v in leaves}
    if batched is None:
        batched = len(dims) == 1 and None not in dims and 0 not in dims
    if not batched:
        return [leaves]
    if len(dims) != 1 or None in dims:
        shapes = ", ".join(f"{n}: {_shape(v)}" for n, v in leaves)
        raise ValueError(f"batched=True, but the tensors differ in their first dimension: {shapes}")
    # v[i, ...] keeps a numpy row an array (v[i] of strings would be a bare bytes object).
    rows = range(dims.pop() or 0)  # one leading dimension, never None (checked above)
    return [
        [(name, v[i] if isinstance(v, list) else v[i, ...]) for name, v in leaves] for i in rows
    ]


def _shape(value: Any) -> str:
    return f"[{len(value)}, ...]" if isinstance(value, list) else str(list(value.shape))


def _hash_value(h: Any, value: Any) -> None:
    """Feeds one feature's value to the digest `h`: its Python form for strings and ragged
    rows, else its bytes (floats rounded) and shape, without copying them again."""
    import numpy as np

    if isinstance(value, list) or value.dtype.kind == "O":
        # Strings and ragged rows: their Python form (an object array's bytes are pointers).
        plain = value if isinstance(value, list) else value.tolist()
        h.update(repr(plain).encode())
        return
    if value.dtype.kind == "f":
        # Batched and per-example kernels may differ in the last bits: keyed on the value
        # in units of 1e-5 (as round(x, 5), without its division), in place in one
        # float64 copy; +0.0 folds -0.0.
        value = value.astype(np.float64)
        value *= 1e5
        np.rint(value, out=value)
        value += 0.0
    else:
        value = np.ascontiguousarray(value)
    h.update(value.data)  # the buffer itself: an image row is not copied into bytes first
    h.update(str(value.shape).encode())


def row_key(row: Row) -> bytes:
    """A digest of one example's names, values and shapes (the multiset's key)."""
    # A digest, so that 20k images do not sit in RAM. SHA-1 for speed, not security: CPUs
    # hash it in hardware (an image row: ~70 us, against ~190 us with blake2b here).
    h = hashlib.sha1(usedforsecurity=False)
    for name, value in row:
        h.update(name.encode() + b"\0")
        _hash_value(h, value)
        h.update(b"\0")
    return h.digest()


def render_value(value: Any) -> str:
    """One feature's value for a message: a scalar as Python shows it, an array as its dtype
    and shape and abridged values."""
    import numpy as np

    if isinstance(value, list):
        text = repr(value)
    elif value.ndim == 0:
        # A float32's shortest form (0.1), not its float64 expansion (0.10000000149011612).
        text = str(value[()]) if value.dtype.kind == "f" else repr(value.item())
    else:
        body = np.array2string(
            value, threshold=6, edgeitems=2, separator=", ", formatter={"float_kind": str}
        )
        text = f"{value.dtype}{list(value.shape)} {' '.join(body.split())}"
    return text if len(text) <= 60 else text[:57] + "..."


def render(row: Row) -> str:
    """One example as `{name: value, ...}`, long arrays abridged."""
    out = "{" + ", ".join(f"{name}: {render_value(value)}" for name, value in row) + "}"
    return out if len(out) <= _WIDTH else out[: _WIDTH - 4] + "...}"


@dataclass
class Examples:
    """The examples of one pass: counts by key, the readable form of each distinct one (when
    asked for), how many there were and whether the pass stopped at the limit."""

    counts: collections.Counter[bytes]
    shown: dict[bytes, str]
    total: int
    truncated: bool


class ExamplesOutOfTime(Exception):
    """A pass over a pipeline that was still going at its deadline."""

    def __init__(self, examples: int):
        super().__init__(f"the pass was cut at its deadline after {examples:,} examples")
        self.examples = examples


def collect_examples(
    ds: tf.data.Dataset,
    *,
    limit: int | None = MAX_COMPARE,
    batched: bool | None = None,
    readable: bool | collections.abc.Container[bytes] = False,
    deadline: float | None = None,
) -> Examples:
    """One pass over `ds` (stopping after the element that reaches `limit` examples).
    `readable`: True renders each distinct example, a container of keys only those.
    `deadline` (a time.monotonic() time): ExamplesOutOfTime once it is past."""
    counts: collections.Counter[bytes] = collections.Counter()
    shown: dict[bytes, str] = {}
    n = 0
    for element in ds:
        if deadline is not None and time.monotonic() > deadline:
            raise ExamplesOutOfTime(n)
        for row in element_rows(element, batched):
            key = row_key(row)
            counts[key] += 1
            if (readable is True or (readable and key in readable)) and key not in shown:
                shown[key] = render(row)
            n += 1
        if limit is not None and n >= limit:
            return Examples(counts, shown, n, True)
    return Examples(counts, shown, n, False)


def example_multiset(ds: tf.data.Dataset, limit: int = MAX_COMPARE) -> collections.Counter[bytes]:
    """Each example of `ds` (batches split into rows), counted by its key."""
    return collect_examples(ds, limit=limit).counts


@dataclass(frozen=True)
class ExampleDiff:
    """Two passes compared as multisets: totals, how many examples of each side have no
    match on the other (with multiplicity) and a few of them, readable, with their surplus."""

    total_a: int
    total_b: int
    missing_a: int  # examples of A not in B
    missing_b: int  # examples of B not in A
    only_a: tuple[tuple[str, int], ...]
    only_b: tuple[tuple[str, int], ...]
    limited: bool = False  # a pass stopped at the limit: only the first examples compared

    @property
    def same(self) -> bool:
        return self.missing_a == 0 and self.missing_b == 0


def batched_pair(a: tf.data.Dataset, b: tf.data.Dataset) -> tuple[bool | None, bool | None]:
    """Which of two datasets yields batches, from their element specs: when every tensor of
    one has exactly one dimension more than the other's, that one is batched and the other
    not; otherwise (None, None): each element decides (see `element_rows`)."""
    import tensorflow as tf

    specs = [getattr(d, "element_spec", None) for d in (a, b)]
    if specs[0] is None or specs[1] is None:
        return None, None
    flat_a, flat_b = (tf.nest.flatten(spec) for spec in specs)
    shapes = [
        (getattr(x, "shape", None), getattr(y, "shape", None))
        for x, y in zip(flat_a, flat_b, strict=False)
    ]
    ranks = [(x.rank, y.rank) for x, y in shapes if x is not None and y is not None]
    if len(flat_a) != len(flat_b) or len(ranks) != len(flat_a) or any(None in r for r in ranks):
        return None, None
    if all(x == y + 1 for x, y in ranks):
        return True, False
    if all(y == x + 1 for x, y in ranks):
        return False, True
    return None, None


def compare_examples(
    a: tf.data.Dataset,
    b: tf.data.Dataset,
    *,
    limit: int | None = MAX_COMPARE,
    batched: bool | None = None,
    show: int = SHOW,
    deadline: float | None = None,
) -> ExampleDiff:
    """The examples of one pass of `a` against one pass of `b`, as multisets. `batched`
    applies to both; None infers it (`batched_pair`, then per element). `deadline`: see
    `collect_examples`."""
    ba, bb = (batched, batched) if batched is not None else batched_pair(a, b)
    # Rendering is most of a pass's CPU: a dataset, which can be read again, is rendered
    # only where the passes differ, in a second pass; a one-shot iterator as it goes.
    ea = collect_examples(
        a, limit=limit, batched=ba, readable=show > 0 and _once(a), deadline=deadline
    )
    eb = collect_examples(
        b, limit=limit, batched=bb, readable=show > 0 and _once(b), deadline=deadline
    )
    extra_a, extra_b = ea.counts - eb.counts, eb.counts - ea.counts
    only_a, only_b = list(extra_a.items())[:show], list(extra_b.items())[:show]
    shown_a = ea.shown or _rendered(a, [k for k, _ in only_a], limit, ba)
    shown_b = eb.shown or _rendered(b, [k for k, _ in only_b], limit, bb)
    return ExampleDiff(
        ea.total,
        eb.total,
        sum(extra_a.values()),
        sum(extra_b.values()),
        tuple((shown_a.get(k, NOT_SEEN_AGAIN), c) for k, c in only_a),
        tuple((shown_b.get(k, NOT_SEEN_AGAIN), c) for k, c in only_b),
        ea.truncated or eb.truncated,
    )


# What a shown example reads when a second pass did not yield it again.
NOT_SEEN_AGAIN = "<not yielded again by a second pass: its values are random>"


def _once(ds: Any) -> bool:
    """Whether `ds` can be read only once (an iterator, not a dataset or list)."""
    return isinstance(ds, collections.abc.Iterator)


def _rendered(
    ds: tf.data.Dataset, keys: list[bytes], limit: int | None, batched: bool | None
) -> dict[bytes, str]:
    """The readable form of the examples of `ds` with these keys, from another pass (none
    when there are no keys)."""
    if not keys:
        return {}
    return collect_examples(ds, limit=limit, batched=batched, readable=set(keys)).shown


def same_examples(
    a: tf.data.Dataset,
    b: tf.data.Dataset,
    *,
    limit: int | None = MAX_COMPARE,
    deadline: float | None = None,
) -> bool:
    """True when one pass of `a` and of `b` yield the same multiset of examples.
    `deadline`: see `collect_examples`."""
    return compare_examples(a, b, limit=limit, show=0, deadline=deadline).same
