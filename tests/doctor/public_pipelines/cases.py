"""The registry of public pipelines. Each case module defines:

    SOURCE       repository and path (and the tutorial's title) it was ported from
    FORMAT       the on-disk format of its data
    FLAW         what the published pipeline does slowly (what the doctor should find)
    TWIN         what the hand-tuned twin changes
    BATCH_SIZE   the batch size the source trains with (or a smaller one, said so)
    FULL         how many examples (images, rows, clips, windows) the original's data has,
                 or the part of it written at size "full" (the docstring says which)
    make_data(dir, size)         writes stand-in data into `dir`: size "small" (the test
                                 suite's) or "full" (FULL examples, the original's size)
    original(dir, batch_size)    the pipeline as published: (features, labels) batches
    tuned(dir, batch_size)       the hand-tuned twin: the same multiset of examples
    model()                      a small compiled Keras model the source trains on it

and optionally SAME_KWARGS (keyword arguments of both pipelines for the same-examples check,
e.g. augmentation off), LIMIT (examples compared, for a pipeline that repeats forever) and
comparable(ds) (a view of either pipeline in which their examples compare, e.g. padding
stripped). `make(case, root, size)` writes a case's data once under `root` (full-size data
in its own folder, `root/full/NAME`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# Ported from training code outside tensorflow/docs and the books (issue 30, section 5).
NEW = [
    "yolov3_voc_ragged",
    "movielens_ondevice_rec",
    "dcase_log_mel",
    "deeplab_voc_segmentation",
    "yolov3_voc_tfrecord",
    "simsiam_two_views",
    "t2t_packing",
    "transformer_bucketing",
]

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
    # training code outside the tutorials and books
    *NEW,
]

# Kinds of data the corpus must cover (issue 19, section 4).
KINDS = ("JPEG", "TFRecord", "CSV", "text", "WAV", "time series", "numpy", "generator", "video")
# Kinds of training code the newer cases must cover (issue 30, section 5); each is said in
# the case's KIND.
NEW_KINDS = ("detection", "segmentation", "packing", "bucketing", "two views", "spectrogram")
NEW_KINDS += ("recommendation",)
SIZES = ("small", "full")


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


def make(case: Case, root: Path, size: str = "small") -> str:
    """The case's data folder under `root` (`root/NAME`, or `root/full/NAME` at size
    "full"), written on first use (a `.done` file marks a complete one)."""
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {SIZES}")
    folder = Path(root) / case.name if size == "small" else Path(root) / "full" / case.name
    if not (folder / ".done").exists():
        folder.mkdir(parents=True, exist_ok=True)
        case.make_data(str(folder), size=size)
        (folder / ".done").write_text("")
    return str(folder)
