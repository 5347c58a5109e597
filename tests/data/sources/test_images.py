"""data/sources/images.py: an image folder (one subfolder per class) becomes uint8 images of
the declared size and class indices in sorted order; images of another size are resized, a
file that is not an image is skipped and a broken image is a bad row named by its path. Its
files are converted in a seeded shuffled order, so that --max-examples and every shard hold a
mix of the classes; the same seed gives the same shards."""

from __future__ import annotations

import numpy as np
from PIL import Image

from tfperf.data.convert.run import convert
from tfperf.data.manifest import load_manifest
from tfperf.data.schema import Schema
from tfperf.data.verify import read_records

from helpers.convertkit import read_back


def _folder(tmp_path):
    root = tmp_path / "imgs"
    for label, color in (("ant", (255, 0, 0)), ("bee", (0, 255, 0)), ("cat", (0, 0, 255))):
        (root / label).mkdir(parents=True)
        for j in range(6):
            Image.new("RGB", (4, 4), color).save(root / label / f"{j}.png")
    return root


def _labels(out) -> list[int]:
    m = load_manifest(out)
    schema: Schema = m.schema
    return [
        int(schema.decode_numpy(data)["label"])
        for s in m.splits["train"].shards
        for _, data in read_records(out / s.file)
    ]


def test_files_are_shuffled_with_a_seed(tmp_path, cli):
    root = _folder(tmp_path)
    res = cli(
        "convert",
        root,
        "--out",
        tmp_path / "a",
        "--image-size",
        "4x4",
        "--quiet",
        "--max-examples",
        "6",
    )
    assert res.exit_code == 0, res.output
    first = _labels(tmp_path / "a")
    assert len(first) == 6 and len(set(first)) >= 2  # not six images of one class
    convert(root, tmp_path / "b", image_size=(4, 4), max_examples=6, progress=False)
    assert _labels(tmp_path / "b") == first  # the default seed: the same order
    full = convert(root, tmp_path / "c", image_size=(4, 4), seed=1, progress=False)
    labels = _labels(tmp_path / "c")
    assert sorted(labels) == [0] * 6 + [1] * 6 + [2] * 6 and labels != sorted(labels)
    assert full.splits["train"].records == 18
    assert np.unique(labels[:6]).size >= 2


def test_image_folder(tmp_path, cli):
    root = tmp_path / "imgs"
    for label, color in (("cat", (255, 0, 0)), ("dog", (0, 0, 255))):
        (root / label).mkdir(parents=True)
        for j, size in enumerate([(4, 4), (6, 8)]):  # (W, H): the second is resized
            Image.new("RGB", size, color).save(root / label / f"{j}.png")
    (root / "dog" / "notes.txt").write_text("not an image")
    res = cli("convert", root, "--out", tmp_path / "o", "--quiet")
    assert res.exit_code == 2 and "--image-size" in res.stderr
    res = cli("convert", root, "--out", tmp_path / "o", "--image-size", "4x4", "--quiet")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "o" / "labels.txt").read_text().split() == ["cat", "dog"]
    got = read_back(tmp_path / "o")
    assert sorted(r["label"].item() for r in got) == [0, 0, 1, 1]  # in a shuffled order
    assert all(r["image"].shape == (4, 4, 3) and r["image"].dtype == np.uint8 for r in got)
    color = {r["label"].item(): r["image"][2, 2].tolist() for r in got}
    assert color == {0: [255, 0, 0], 1: [0, 0, 255]}
    # a broken image file is a bad row named with its path
    (root / "cat" / "2.png").write_bytes(b"not a png")
    m = convert(root, tmp_path / "o2", image_size=(4, 4), on_bad_row="skip", progress=False)
    assert m.splits["train"].rejected == 1
    assert "2.png" in (tmp_path / "o2" / m.splits["train"].rejects_file).read_text()
