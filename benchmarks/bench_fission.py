"""Map fission (issue 30, section 3): a JPEG pipeline whose per-example map reads, decodes,
resizes to 32x32, flips, changes the saturation, brightness and contrast and
normalizes (the map made parallel, as a user who
read the tf.data guide writes it), against the same pipeline with the map split by
`tfperf.doctor.rewrites.fission.split_maps`: read, decode and resize per example (parallel),
then the batch, then the flip, saturation and normalization once per batch (vectorized).
The pipeline alone, paired and interleaved (tfperf.measure.side_by_side).

    python benchmarks/bench_fission.py [--quick] [--repeats N] [--batches N]
"""

from __future__ import annotations

from common import DATA_ROOT, announce, machine, paired, parse_args, say, spread, table

from tfperf.measure import compare, pipeline_probe, side_by_side

IMAGES = 3000
SIDE = 32
BATCH = 64


def write_jpegs(n: int) -> list[str]:
    """`n` JPEGs of random images of 40-64 pixels a side, written once under runs/bench."""
    import numpy as np
    import tensorflow as tf

    folder = DATA_ROOT / "fission_jpegs_small"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        h, w = (int(v) for v in rng.integers(40, 65, size=2))
        path = folder / f"{i:05d}.jpg"
        if not path.exists():
            img = rng.integers(0, 255, size=(h, w, 3), dtype=np.uint8)
            tf.io.write_file(str(path), tf.io.encode_jpeg(img))
        paths.append(str(path))
    return paths


def main() -> None:
    args = parse_args(__doc__ or "")
    import tensorflow as tf

    from tfperf.doctor.graph import lint
    from tfperf.doctor.rewrites.fission import split_maps

    def load(path: tf.Tensor) -> tf.Tensor:
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        img = tf.image.resize(tf.image.convert_image_dtype(img, tf.float32), [SIDE, SIDE])
        img = tf.image.flip_left_right(img)
        img = tf.image.adjust_saturation(img, 1.3)
        img = tf.image.adjust_brightness(img, 0.05)
        img = tf.image.adjust_contrast(img, 1.1)
        return (img - tf.constant([0.485, 0.456, 0.406])) / tf.constant([0.229, 0.224, 0.225])

    paths = write_jpegs(300 if args.quick else IMAGES)
    original = tf.data.Dataset.from_tensor_slices(paths)
    original = original.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
    split = split_maps(lint.read_graph(original), original)
    assert split is not None, "the map was not split"
    say(f"split: {split.doctor_note}")
    repeats = args.repeats or (3 if args.quick else 9)
    batches = args.batches or (4 if args.quick else len(paths) // BATCH)
    probes = [
        pipeline_probe(name, ds, batches=batches, warmup=3)
        for name, ds in (("original", original), ("split", split))
    ]
    say(machine())
    runs = side_by_side(probes, repeats=repeats, on_run=announce(repeats))
    c = compare(runs["original"], runs["split"])
    rows = [
        ["original (parallel map)", spread(runs["original"].examples_per_s), "1.00x"],
        ["split (fission)", spread(runs["split"].examples_per_s), paired(c)],
    ]
    print(table(["pipeline", "examples/s", "vs original (paired)"], rows))
    print(f"split faster beyond the noise: {c.faster}")


if __name__ == "__main__":
    main()
