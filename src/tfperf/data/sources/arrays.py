"""NumPy sources: an .npz (each array a feature, the first axis the row) and a single .npy
(one feature named after the file, memory-mapped)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.data.sources.base import Row, RowSource, SourceError, dtype_name


class NpzSource(RowSource):
    """An .npz: each array is a feature; the first axis is the row."""

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if getattr(self, "_arrays", None) is None:
            try:
                with np.load(self.path, allow_pickle=False) as z:
                    arrays = {k: z[k] for k in z.files}
            except Exception as exc:
                raise SourceError(f"{self.path}: cannot read as .npz: {exc}") from None
            self._arrays = _check_arrays(arrays, self.path)
        return self._arrays

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values())))

    def infer_schema(self) -> Schema:
        feats = []
        for k, a in self.arrays.items():
            where = f"{self.path}: array '{k}'"
            feats.append(Feature(name=k, dtype=dtype_name(a.dtype, where), shape=a.shape[1:]))
        return Schema(features=tuple(feats))

    def read(self, start: int, stop: int) -> Iterator[Row]:
        chunks = {k: a[start:stop] for k, a in self.arrays.items()}
        for i in range(stop - start):
            yield {k: c[i] for k, c in chunks.items()}


class NpySource(NpzSource):
    """A single .npy: one feature named after the file; memory-mapped."""

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if getattr(self, "_arrays", None) is None:
            try:
                arr = np.load(self.path, mmap_mode="r", allow_pickle=False)
            except Exception as exc:
                raise SourceError(f"{self.path}: cannot read as .npy: {exc}") from None
            self._arrays = _check_arrays({self.default_name: arr}, self.path)
        return self._arrays


def _check_arrays(arrays: dict[str, np.ndarray], path: str) -> dict[str, np.ndarray]:
    if not arrays:
        raise SourceError(f"{path}: no arrays inside")
    lengths = {k: (a.shape[0] if a.ndim else None) for k, a in arrays.items()}
    if None in lengths.values():
        k = next(k for k, v in lengths.items() if v is None)
        raise SourceError(f"{path}: array '{k}' is a scalar; expected rows on its first axis")
    if len(set(lengths.values())) > 1:
        raise SourceError(f"{path}: arrays differ in length (first axis): {lengths}")
    return arrays
