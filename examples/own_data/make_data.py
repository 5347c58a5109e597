"""Makes the two small datasets of the README's "Your own data and model" section, the way
a user's own files would look: a CSV table and a folder of images, each with a train and an
eval part. Stands in for your files; nothing in tfperf reads this script.

    python examples/own_data/make_data.py runs/own_data

writes runs/own_data/flowers.csv and flowers_eval.csv (four measurements and the species
0, 1 or 2 per row) and runs/own_data/shapes/{train,eval}/{circle,square}/*.png.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

COLUMNS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
# Mean measurements (cm) of each species: rows are drawn around them, so the species can
# be learned from the four numbers.
MEANS = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])


def write_csv(path: Path, rows: int, rng: np.random.Generator) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow([*COLUMNS, "species"])
        for _ in range(rows):
            species = int(rng.integers(3))
            values = MEANS[species] + rng.normal(0.0, 0.3, size=4)
            out.writerow([*(f"{v:.2f}" for v in values), species])


def write_images(root: Path, per_class: int, rng: np.random.Generator) -> None:
    for shape in ("circle", "square"):
        folder = root / shape
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            image = Image.new("RGB", (40, 40), tuple(int(c) for c in rng.integers(0, 80, 3)))
            x, y = (int(v) for v in rng.integers(4, 16, 2))
            size = int(rng.integers(14, 22))
            box = (x, y, x + size, y + size)
            draw = ImageDraw.Draw(image)
            color = tuple(int(c) for c in rng.integers(150, 256, 3))
            (draw.ellipse if shape == "circle" else draw.rectangle)(box, fill=color)
            image.save(folder / f"{shape}_{i:04d}.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", default="runs/own_data", help="output folder")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    write_csv(out / "flowers.csv", 1200, rng)
    write_csv(out / "flowers_eval.csv", 300, rng)
    write_images(out / "shapes" / "train", 150, rng)
    write_images(out / "shapes" / "eval", 40, rng)
    print(f"wrote {out}/flowers.csv, {out}/flowers_eval.csv and {out}/shapes/{{train,eval}}")


if __name__ == "__main__":
    main()
