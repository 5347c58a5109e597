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
    """A tensor as numpy (a sparse one dense); a ragged tensor as nested lists. For comparing
    two passes element by element; examples are keyed from `_row_value`."""
    import numpy as np
    import tensorflow as tf

    if isinstance(t, tf.SparseTensor):
        # Dense, whatever its entries: RaggedTensor.from_sparse refuses gaps in a row.
        return tf.sparse.to_dense(t).numpy()
    if isinstance(t, tf.RaggedTensor):
        return t.to_list()
    return np.asarray(t)


@dataclass(frozen=True)
class SparseValue:
    """A sparse tensor's parts as numpy, split into rows like a dense one. Its value as an
    example is the dense form cut to its stored entries (`dense`): a varlen feature parsed
    per example ([len]) and in a batch ([batch, longest]) then give the same rows, as
    does the same feature ragged."""

    indices: Any  # [n, rank] int64
    values: Any  # [n]
    dense_shape: Any  # [rank] int64

    @property
    def ndim(self) -> int:
        return len(self.dense_shape)

    def row(self, i: int) -> Any:
        """Row `i` of the leading dimension: a SparseValue, or a scalar for a rank-1 one."""
        import numpy as np

        at = self.indices[:, 0] == i
        if self.ndim == 1:
            found = self.values[at]
            # A 0-d array, as a dense row of a vector is (v[i, ...]).
            return np.asarray(found[0] if len(found) else np.zeros((), self.values.dtype))
        return SparseValue(self.indices[at, 1:], self.values[at], self.dense_shape[1:])

    def dense(self) -> Any:
        """The dense values up to the last stored entry along each axis."""
        import numpy as np

        extent = tuple(int(m) + 1 for m in self.indices.max(axis=0)) if len(self.indices) else ()
        shape = extent or (0,) * self.ndim
        zero = b"" if self.values.dtype.kind in "OSU" else 0
        out = np.full(shape, zero, dtype=self.values.dtype)
        if len(self.indices):
            out[tuple(self.indices.T)] = self.values
        return out


def _row_value(t: Any) -> Any:
    """A tensor as numpy, split into rows by `element_rows`: a ragged tensor as a list of its
    rows (numpy slices of its values, nested lists for a deeper ragged rank: a ragged row
    is then keyed as the dense row of the same values), a sparse one as a SparseValue."""
    import numpy as np
    import tensorflow as tf

    if isinstance(t, tf.SparseTensor):
        return SparseValue(t.indices.numpy(), t.values.numpy(), t.dense_shape.numpy())
    if isinstance(t, tf.RaggedTensor):
        return _ragged_rows(t)
    return np.asarray(t)


def _ragged_rows(rt: Any) -> list[Any]:
    import tensorflow as tf

    splits = rt.row_splits.numpy()
    inner = _ragged_rows(rt.values) if isinstance(rt.values, tf.RaggedTensor) else None
    values = rt.values.numpy() if inner is None else inner
    return [values[s:e] for s, e in zip(splits[:-1], splits[1:], strict=True)]


def canonical(value: Any) -> Any:
    """One example's feature in the form it is keyed and shown in: a sparse value dense up
    to its stored entries, a ragged row whose parts have one shape stacked into the dense
    array it would be (so a ragged row and a dense or padded-then-stripped one match)."""
    import numpy as np

    if isinstance(value, SparseValue):
        return value.dense()
    if isinstance(value, list):
        items = [canonical(v) for v in value]
        arrays = [v for v in items if isinstance(v, np.ndarray)]
        if items and len(arrays) == len(items):
            if len({(a.shape, a.dtype) for a in arrays}) == 1:
                return np.stack(arrays)
        return items
    return value


def _leading(value: Any) -> int | None:
    if isinstance(value, list):
        return len(value)
    if isinstance(value, SparseValue):
        return int(value.dense_shape[0]) if value.ndim else None
    return int(value.shape[0]) if value.ndim else None


def _take_row(value: Any, i: int) -> Any:
    if isinstance(value, (list, SparseValue)):
        return value[i] if isinstance(value, list) else value.row(i)
    # v[i, ...] keeps a numpy row an array (v[i] of strings would be a bare bytes object).
    return value[i, ...]


def element_rows(element: Any, batched: bool | None = None) -> list[Row]:
    """The examples in one element. `batched`: True splits the leading dimension of every
    tensor into rows, False keeps the element whole, None splits only when every tensor has
    the same leading dimension (a batch) and keeps scalars and mixed shapes whole."""
    leaves = [(name, _row_value(t)) for name, t in named_leaves(element)]
    dims = {_leading(v) for _, v in leaves}
    if batched is None:
        batched = len(dims) == 1 and None not in dims and 0 not in dims
    if not batched:
        return [leaves]
    if len(dims) != 1 or None in dims:
        shapes = ", ".join(f"{n}: {_shape(v)}" for n, v in leaves)
        raise ValueError(f"batched=True, but the tensors differ in their first dimension: {shapes}")
    rows = range(dims.pop() or 0)  # one leading dimension, never None (checked above)
    return [[(name, _take_row(v, i)) for name, v in leaves] for i in rows]


def _shape(value: Any) -> str:
    if isinstance(value, SparseValue):
        return str(value.dense_shape.tolist())
    return f"[{len(value)}, ...]" if isinstance(value, list) else str(list(value.shape))


def _hash_value(h: Any, value: Any) -> None:
    """Feeds one feature's canonical value to the digest `h`: its Python form for strings,
    each part of a ragged row whose parts differ in shape, else its bytes (floats rounded)
    and shape, without copying them again."""
    import numpy as np

    if isinstance(value, list):
        h.update(b"[")
        for v in value:
            _hash_value(h, v)
            h.update(b",")
        h.update(b"]")
        return
    if value.dtype.kind == "O":
        # Strings: their Python form (an object array's bytes are pointers).
        h.update(repr(value.tolist()).encode())
        h.update(str(value.shape).encode())
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
        _hash_value(h, canonical(value))
        h.update(b"\0")
    return h.digest()


def render_value(value: Any) -> str:
    """One feature's value for a message: a scalar as Python shows it, an array as its dtype
    and shape and abridged values."""
    import numpy as np

    value = canonical(value)
    if isinstance(value, list):
        text = repr([v.tolist() if isinstance(v, np.ndarray) else v for v in value])
    elif value.ndim == 0:
        # A float32's shortest form (0.1), not its float64 expansion (0.10000000149011612).
        text = str(value[()]) if value.dtype.kind == "f" else repr(value.item())
    else:
        body = np.array2string(
            value, threshold=6, edgeitems=2, separator=", ", formatter={"float_kind": str}
        )
        text = f"{value.dtype}{list(value.shape)} {' '.join(body.split())}"
    return text if len(text) <= 60 else text[:57] + "..."


def padding_values(ds: Any) -> list[Any] | None:
    """The padding values of the last padded_batch in `ds`'s chain, one per component of its
    elements (tf.nest order); None when it has no padded_batch. Read from the Python
    datasets (tf.data's own objects), so nothing is serialized or run."""
    import numpy as np
    import tensorflow as tf

    todo, seen = [ds], set()
    while todo:
        node = todo.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        pads = getattr(node, "_padding_values", None)
        if pads is not None and hasattr(node, "_padded_shapes"):
            try:
                return [np.asarray(p) for p in tf.nest.flatten(pads)]
            except Exception:  # noqa: BLE001 - a padding we cannot read: each dtype's zero
                return []
        inputs = node._inputs() if hasattr(node, "_inputs") else []
        todo += list(inputs)
    return None


def _default_pad(value: Any) -> Any:
    return b"" if value.dtype.kind in "OSU" else False if value.dtype.kind == "b" else 0


def strip_padding(value: Any, pad: Any = None) -> Any:
    """A feature without its trailing padding: cut along every axis after the last value
    that is not `pad` (default: its dtype's zero, as padded_batch pads). The same cut of a
    row padded to any length; lossless between two rows of one shape."""
    import numpy as np

    value = canonical(value)
    if not isinstance(value, np.ndarray) or value.ndim == 0:
        return value
    pad = _default_pad(value) if pad is None else pad
    kept = np.nonzero(value != pad)
    if not kept[0].size:
        return value[(slice(0, 0),) * value.ndim]
    return value[tuple(slice(0, int(ix.max()) + 1) for ix in kept)]


# A strip plan: feature name -> its padding value (None: its dtype's zero); ALL: every
# feature not named (a padded_batch whose padding could not be paired with the names).
Strip = dict[str, Any]
ALL = "*"


def stripped(row: Row, strip: Strip) -> Row:
    """A row's features without their trailing padding, as `strip` plans; the others as
    they are."""
    import numpy as np

    out = []
    for name, v in row:
        if name not in strip and ALL not in strip:
            out.append((name, v))
            continue
        pad = strip.get(name, strip.get(ALL))
        out.append((name, strip_padding(v, pad if pad is not None and np.size(pad) == 1 else None)))
    return out


def _strip_plan(ds: Any, pads: list[Any] | None) -> Strip:
    """Each feature of `ds` with its padded_batch's padding value (paired by position)."""
    if not pads:
        return {ALL: None}
    names = [n for n, _ in named_leaves(getattr(ds, "element_spec", None))]
    return dict(zip(names, pads, strict=True)) if len(names) == len(pads) else {ALL: None}


def _sparse_names(ds: Any) -> set[str] | None:
    import tensorflow as tf

    spec = getattr(ds, "element_spec", None)
    if spec is None:
        return None
    return {n for n, s in named_leaves(spec) if isinstance(s, tf.SparseTensorSpec)}


PADDED_WHY = "padded_batch pads each batch to its own longest example"
SPARSE_WHY = "a sparse feature ends at its last stored entry, a dense one at its shape"


def _why_padded(a: Any, b: Any) -> str:
    why = []
    if padding_values(a) is not None or padding_values(b) is not None:
        why.append(PADDED_WHY)
    sparse_a, sparse_b = _sparse_names(a), _sparse_names(b)
    if sparse_a is not None and sparse_b is not None and sparse_a != sparse_b:
        why.append(SPARSE_WHY)
    return "; ".join(why)


def strip_plans(a: Any, b: Any) -> tuple[Strip | None, Strip | None]:
    """What to strip on each side: with a padded_batch on either side, each side's padding
    (a side without one takes the other's); a feature sparse on one side and dense on the
    other loses its trailing zeros on both (a sparse row ends at its last stored entry, the
    dense one at its shape). (None, None): nothing to strip."""
    pads_a, pads_b = padding_values(a), padding_values(b)
    plan_a = plan_b = None
    if pads_a is not None or pads_b is not None:
        plan_a = _strip_plan(a, pads_a if pads_a is not None else pads_b)
        plan_b = _strip_plan(b, pads_b if pads_b is not None else pads_a)
    sparse_a, sparse_b = _sparse_names(a), _sparse_names(b)
    if sparse_a is None or sparse_b is None or sparse_a == sparse_b:
        return plan_a, plan_b
    # A feature sparse on one side and dense on the other is compared without trailing zeros.
    mixed = sparse_a ^ sparse_b
    plan_a, plan_b = plan_a or {}, plan_b or {}
    for name in mixed:
        plan_a.setdefault(name, None)
        plan_b.setdefault(name, None)
    return plan_a, plan_b


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
    # With padding stripped (counts are then of stripped rows): the rows as they came.
    exact: collections.Counter[bytes] | None = None


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
    strip: Strip | None = None,
) -> Examples:
    """One pass over `ds` (stopping after the element that reaches `limit` examples).
    `readable`: True renders each distinct example, a container of keys only those.
    `deadline` (a time.monotonic() time): ExamplesOutOfTime once it is past. `strip`: the
    features' padding (see `stripped`): each row is keyed without its trailing padding, and
    also as it came (`Examples.exact`)."""
    counts: collections.Counter[bytes] = collections.Counter()
    exact: collections.Counter[bytes] | None = None if strip is None else collections.Counter()
    shown: dict[bytes, str] = {}
    n = 0
    for element in ds:
        if deadline is not None and time.monotonic() > deadline:
            raise ExamplesOutOfTime(n)
        for row in element_rows(element, batched):
            if exact is not None and strip is not None:
                exact[row_key(row)] += 1
                row = stripped(row, strip)
            key = row_key(row)
            counts[key] += 1
            if (readable is True or (readable and key in readable)) and key not in shown:
                shown[key] = render(row)
            n += 1
        if limit is not None and n >= limit:
            return Examples(counts, shown, n, True, exact)
    return Examples(counts, shown, n, False, exact)


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
    # Compared without trailing padding (a padded_batch on a side, or a feature sparse on
    # one side and dense on the other).
    stripped: bool = False
    # Examples of A that match only once their padding is stripped (their padded length
    # differs from B's): 0 when the passes are equal as they came.
    padding_only: int = 0
    why_padded: str = ""  # where the padding comes from, for `note`

    @property
    def same(self) -> bool:
        return self.missing_a == 0 and self.missing_b == 0

    @property
    def note(self) -> str:
        """What the comparison ignored, in one sentence ("" when nothing)."""
        if not self.stripped:
            return ""
        if not self.padding_only:
            return "compared without trailing padding; the padding is the same"
        return (
            f"compared without trailing padding: {self.padding_only:,} of ds_a's "
            f"{self.total_a:,} examples differ from ds_b's in their padding alone "
            f"({self.why_padded})"
        )


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
    padding: bool = False,
) -> ExampleDiff:
    """The examples of one pass of `a` against one pass of `b`, as multisets. `batched`
    applies to both; None infers it (`batched_pair`, then per element). `deadline`: see
    `collect_examples`. `padding`: when either side has a padded_batch, examples are
    compared without their trailing padding (each side stripped of its own padding value,
    a side without one of the other's; a feature sparse on one side and dense on the other
    without its trailing zeros: see `strip_plans`), and the diff says how many differ in it
    alone."""
    ba, bb = (batched, batched) if batched is not None else batched_pair(a, b)
    strip_a, strip_b = strip_plans(a, b) if padding else (None, None)
    # Rendering is most of a pass's CPU: a dataset, which can be read again, is rendered
    # only where the passes differ, in a second pass; a one-shot iterator as it goes.
    ea = collect_examples(
        a,
        limit=limit,
        batched=ba,
        readable=show > 0 and _once(a),
        deadline=deadline,
        strip=strip_a,
    )
    eb = collect_examples(
        b,
        limit=limit,
        batched=bb,
        readable=show > 0 and _once(b),
        deadline=deadline,
        strip=strip_b,
    )
    extra_a, extra_b = ea.counts - eb.counts, eb.counts - ea.counts
    only_a, only_b = list(extra_a.items())[:show], list(extra_b.items())[:show]
    shown_a = ea.shown or _rendered(a, [k for k, _ in only_a], limit, ba, strip_a)
    shown_b = eb.shown or _rendered(b, [k for k, _ in only_b], limit, bb, strip_b)
    padding_only = 0
    if ea.exact is not None and eb.exact is not None:
        # Of A's examples that B matches once stripped, those that B lacks as they came.
        padding_only = max(0, sum((ea.exact - eb.exact).values()) - sum(extra_a.values()))
    return ExampleDiff(
        ea.total,
        eb.total,
        sum(extra_a.values()),
        sum(extra_b.values()),
        tuple((shown_a.get(k, NOT_SEEN_AGAIN), c) for k, c in only_a),
        tuple((shown_b.get(k, NOT_SEEN_AGAIN), c) for k, c in only_b),
        ea.truncated or eb.truncated,
        strip_a is not None,
        padding_only,
        _why_padded(a, b) if strip_a is not None else "",
    )


# What a shown example reads when a second pass did not yield it again.
NOT_SEEN_AGAIN = "<not yielded again by a second pass: its values are random>"


def _once(ds: Any) -> bool:
    """Whether `ds` can be read only once (an iterator, not a dataset or list)."""
    return isinstance(ds, collections.abc.Iterator)


def _rendered(
    ds: tf.data.Dataset,
    keys: list[bytes],
    limit: int | None,
    batched: bool | None,
    strip: Strip | None = None,
) -> dict[bytes, str]:
    """The readable form of the examples of `ds` with these keys, from another pass (none
    when there are no keys)."""
    if not keys:
        return {}
    return collect_examples(ds, limit=limit, batched=batched, readable=set(keys), strip=strip).shown


def same_examples(
    a: tf.data.Dataset,
    b: tf.data.Dataset,
    *,
    limit: int | None = MAX_COMPARE,
    deadline: float | None = None,
    padding: bool = False,
) -> bool:
    """True when one pass of `a` and of `b` yield the same multiset of examples.
    `deadline`: see `collect_examples`; `padding`: see `compare_examples`."""
    return compare_examples(a, b, limit=limit, show=0, deadline=deadline, padding=padding).same
