"""The registry of public pipelines. Each case module defines:

    SOURCE       repository and path (and the tutorial's title) it was ported from
    FORMAT       the on-disk format of its data
    FLAW         what the published pipeline does slowly (what the doctor should find)
    TWIN         what the hand-tuned twin changes
    BATCH_SIZE   the batch size the source trains with (or a smaller one, said so)
    make_data(dir)               writes small stand-in data into `dir`
    original(dir, batch_size)    the pipeline as published: (features, labels) batches
    tuned(dir, batch_size)       the hand-tuned twin: the same multiset of examples
    model()                      a small compiled Keras model the source trains on it

and optionally SAME_KWARGS (keyword arguments of both pipelines for the same-examples check,
e.g. augmentation off), LIMIT (examples compared, for a pipeline that repeats forever) and
comparable(ds) (a view of either pipeline in which their examples compare, e.g. padding
stripped). `make(case, root)` writes a case's data once under `root`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

NAMES = [
    # images from folders (JPEG) and from TFDS' TFRecords
    "flowers_keras_utility",
    "flowers_list_files",
    "flowers_augment_layers",
    "flowers_augment_counter",
    "pets_segmentation",
    "pix2pix_facades",
    # TFRecords of tf.train.Example
    "tfrecord_features",
    "fashion_mnist_tfrecord",
    "imagenet_resnet",
    "mnist_tfds_keras",
    # CSV
    "titanic_make_csv",
    "housing_csv_reader",
    "petfinder_dataframe",
    # text
    "stackoverflow_vectorize",
    "iliad_py_function",
    "shakespeare_chars",
    # audio (WAV)
    "speech_commands_files",
    # time series
    "jena_window_generator",
    "ridership_mulvar",
    # numpy arrays, generators, video
    "fashion_mnist_d2l",
    "artificial_generator",
    "video_frames",
]

# Kinds of data the corpus must cover (issue 19, section 4).
KINDS = ("JPEG", "TFRecord", "CSV", "text", "WAV", "time series", "numpy", "generator", "video")


@dataclass(frozen=True)
class Case:
    name: str
    module: ModuleType

    def __getattr__(self, attr: str) -> Any:  # SOURCE, FLAW, original, ...
        return getattr(self.module, attr)

    @property
    def batch_size(self) -> int:
        return self.module.BATCH_SIZE

    @property
    def same_kwargs(self) -> dict[str, Any]:
        return dict(getattr(self.module, "SAME_KWARGS", {}))

    @property
    def limit(self) -> int | None:
        return getattr(self.module, "LIMIT", None)

    def comparable(self, ds: Any) -> Any:
        view = getattr(self.module, "comparable", None)
        return view(ds) if view is not None else ds


def load(name: str) -> Case:
    return Case(name, importlib.import_module(f"{__package__}.{name}"))


CASES = [load(n) for n in NAMES]
BY_NAME = {c.name: c for c in CASES}


def make(case: Case, root: Path) -> str:
    """The case's data folder under `root`, written on first use (a `.done` file marks a
    complete one)."""
    folder = Path(root) / case.name
    if not (folder / ".done").exists():
        folder.mkdir(parents=True, exist_ok=True)
        case.make_data(str(folder))
        (folder / ".done").write_text("")
    return str(folder)
