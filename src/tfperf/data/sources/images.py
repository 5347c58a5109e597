"""Image-folder source: root/<class>/<image> -> `image` uint8 (H, W, C) resized to the
declared size and `label` int64, the index of the class subfolder in sorted order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from tfperf.data.schema import Feature, Schema
from tfperf.data.sources.base import BadValue, Row, RowSource, SourceError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


class ImageFolder(RowSource):
    """root/<class>/<image>: features `image` (uint8, H x W x C) and `label` (class index).

    Classes are the subfolders in sorted order (or `classes`, to keep the indices of an
    earlier split); images are converted to C channels and resized to (H, W). Files are
    read in an order shuffled with `seed`: the first rows, and every shard, mix classes.
    """

    def __init__(
        self,
        path: str,
        size: tuple[int, int],
        channels: int = 3,
        classes: Sequence[str] | None = None,
        seed: int = 0,
    ):
        super().__init__(path)
        if channels not in _MODES:
            raise SourceError(f"{path}: channels: expected 1, 3 or 4, found {channels}")
        self.size = (int(size[0]), int(size[1]))
        self.channels = channels
        root = Path(path)
        found = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not found:
            raise SourceError(f"{path}: no class subfolders; expected {path}/<label>/<image>")
        if classes is not None:
            unknown = [c for c in found if c not in classes]
            if unknown:
                raise SourceError(
                    f"{path}: classes {unknown} are not in the earlier list {list(classes)}"
                )
        self.classes = list(classes) if classes is not None else found
        self.files: list[tuple[str, int]] = []
        for c in found:
            for p in sorted((root / c).iterdir()):
                if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES:
                    self.files.append((str(p), self.classes.index(c)))
        # Sorted first, then shuffled: the order depends on the seed and names only.
        order = np.random.default_rng(seed).permutation(len(self.files))
        self.files = [self.files[i] for i in order]
        self.shuffle_seed = seed

    @property
    def default_name(self) -> str:
        return Path(self.path).resolve().name or "images"

    def __len__(self) -> int:
        return len(self.files)

    def infer_schema(self) -> Schema:
        return image_schema(self.size, self.channels)

    def read(self, start: int, stop: int) -> Iterator[Row]:
        # PIL is imported on first use: only image folders need it.
        from PIL import Image

        for path, label in self.files[start:stop]:
            try:
                with Image.open(path) as opened:
                    im = opened.convert(_MODES[self.channels])
                    if im.size != (self.size[1], self.size[0]):  # PIL sizes are (W, H)
                        im = im.resize((self.size[1], self.size[0]), Image.Resampling.BILINEAR)
                    arr = np.asarray(im, dtype=np.uint8)
            except Exception as exc:
                # An unreadable file is a bad row: the writer names it (or rejects it).
                yield {
                    "image": BadValue("a readable image", f"{path}: {exc}"),
                    "label": np.int64(label),
                }
                continue
            if arr.ndim == 2:
                arr = arr[:, :, None]
            yield {"image": arr, "label": np.int64(label)}


def image_schema(size: tuple[int, int], channels: int = 3) -> Schema:
    return Schema.of(
        Feature(name="image", dtype="uint8", shape=(size[0], size[1], channels)),
        Feature(name="label", dtype="int64"),
    )
