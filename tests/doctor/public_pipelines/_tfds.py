"""Stand-ins for the TFDS datasets the tutorials load (tf_flowers, oxford_iiit_pet, mnist):
real TFDS datasets with the same features, built from random pictures into the case's data
folder by `prepare`, so that `tfds.load(NAME, data_dir=...)` reads them exactly as it
reads the downloaded ones (TFRecord shards, per-example decoding), with no download."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from ._shared import DISTINCT, count, picture


def _jpeg(pool: dict, i: int, rng: np.random.Generator, h: int, w: int, tint: int) -> io.BytesIO:
    """At full size: a JPEG file object, one of DISTINCT encoded pictures cycled (stored as
    is, as TFDS stores the downloaded datasets' JPEGs; encoding thousands of large pictures
    to PNG would make the writing take many minutes)."""
    if i % DISTINCT not in pool:
        pool[i % DISTINCT] = tf.io.encode_jpeg(picture(rng, h, w, tint=tint)).numpy()
    return io.BytesIO(pool[i % DISTINCT])


FLOWERS = "standin_tf_flowers"
PETS = "standin_oxford_iiit_pet"
MNIST = "standin_mnist"


class StandinTfFlowers(tfds.core.GeneratorBasedBuilder):
    """tf_flowers' features: an image of any size and one of 5 labels; one 'train' split."""

    VERSION = tfds.core.Version("3.0.1")
    SIZE = "small"  # or "full": the original's number of examples

    def _info(self) -> tfds.core.DatasetInfo:
        features = tfds.features.FeaturesDict(
            {"image": tfds.features.Image(), "label": tfds.features.ClassLabel(num_classes=5)}
        )
        return tfds.core.DatasetInfo(
            builder=self, features=features, supervised_keys=("image", "label")
        )

    def _split_generators(self, dl_manager):  # noqa: ARG002
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        rng = np.random.default_rng(1)
        pool: dict = {}
        for i in range(count(self.SIZE, 60, 3_670)):
            if self.SIZE == "full":
                h, w = int(rng.integers(240, 360)), int(rng.integers(320, 500))
                yield i, {"image": _jpeg(pool, i, rng, h, w, i % 5), "label": i % 5}
                continue
            else:
                h, w = int(rng.integers(50, 90)), int(rng.integers(60, 100))
            yield i, {"image": picture(rng, h, w, tint=i % 5), "label": i % 5}


class StandinOxfordIiitPet(tfds.core.GeneratorBasedBuilder):
    """oxford_iiit_pet's features the tutorial reads: image, segmentation_mask (1, 2, 3 per
    pixel), label; 'train' and 'test'."""

    VERSION = tfds.core.Version("3.2.0")
    SIZE = "small"

    def _info(self) -> tfds.core.DatasetInfo:
        features = tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(),
                "segmentation_mask": tfds.features.Image(shape=(None, None, 1)),
                "label": tfds.features.ClassLabel(num_classes=37),
            }
        )
        return tfds.core.DatasetInfo(builder=self, features=features)

    def _split_generators(self, dl_manager):  # noqa: ARG002
        return {
            "train": self._generate_examples(count(self.SIZE, 48, 3_680), 2),
            "test": self._generate_examples(count(self.SIZE, 8, 3_669), 3),
        }

    def _generate_examples(self, n: int, seed: int):
        rng = np.random.default_rng(seed)
        pool: dict = {}
        for i in range(n):
            if self.SIZE == "full":
                h, w = int(rng.integers(240, 400)), int(rng.integers(240, 400))
                image = _jpeg(pool, i, rng, h, w, i)
                h, w = tf.io.extract_jpeg_shape(image.getvalue()).numpy()[:2]
            else:
                h, w = int(rng.integers(60, 100)), int(rng.integers(60, 100))
                image = picture(rng, h, w, tint=i)
            mask = np.ones((h, w, 1), np.uint8)
            mask[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = 2  # the pet
            mask[h // 4, w // 4 : 3 * w // 4] = 3  # its outline
            yield (
                i,
                {"image": image, "segmentation_mask": mask, "label": i % 37},
            )


class StandinMnist(tfds.core.GeneratorBasedBuilder):
    """mnist's features: a 28x28x1 image and one of 10 labels; 'train' and 'test'."""

    VERSION = tfds.core.Version("3.0.1")
    SIZE = "small"

    def _info(self) -> tfds.core.DatasetInfo:
        features = tfds.features.FeaturesDict(
            {
                "image": tfds.features.Image(shape=(28, 28, 1)),
                "label": tfds.features.ClassLabel(num_classes=10),
            }
        )
        return tfds.core.DatasetInfo(
            builder=self, features=features, supervised_keys=("image", "label")
        )

    def _split_generators(self, dl_manager):  # noqa: ARG002
        return {
            "train": self._generate_examples(count(self.SIZE, 512, 60_000), 4),
            "test": self._generate_examples(count(self.SIZE, 64, 10_000), 5),
        }

    def _generate_examples(self, n: int, seed: int):
        rng = np.random.default_rng(seed)
        for i in range(n):
            image = rng.integers(0, 256, size=(28, 28, 1), dtype=np.uint8)
            yield i, {"image": image, "label": i % 10}


# TFDS looks for a builder's code beside its package (dataset_builder.code_path), which for
# a dotted module name needs the importlib_resources package (not installed here): these
# builders claim a top-level module name, so TFDS falls back to no code path.
for _builder in (StandinTfFlowers, StandinOxfordIiitPet, StandinMnist):
    _builder.__module__ = "standin_tfds"

BUILDERS = {FLOWERS: StandinTfFlowers, PETS: StandinOxfordIiitPet, MNIST: StandinMnist}


def prepare(name: str, data_dir: Path, size: str = "small") -> None:
    """Builds the stand-in `name` into `data_dir` (what tfds.load would download), with the
    original's number of examples at size "full"."""
    builder = BUILDERS[name]
    builder.SIZE = size
    try:
        builder(data_dir=str(data_dir)).download_and_prepare()
    finally:
        builder.SIZE = "small"
