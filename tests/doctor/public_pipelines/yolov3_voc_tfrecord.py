"""PASCAL VOC detection TFRecords (variable numbers of boxes) into YOLOv3 grid targets.

Source: zzh8829/yolov3-tf2 yolov3_tf2/dataset.py and train.py (load_tfrecord_dataset:
list_files(file_pattern), flat_map(TFRecordDataset), map(parse_tfrecord) without
parallelism; parse_tfrecord: parse_single_example of the JPEG and five VarLenFeatures
(bbox xmin/ymin/xmax/ymax, class text), decode_jpeg, resize to 416x416, the class names
looked up in a StaticHashTable built from the class file, boxes stacked and padded to
yolo_max_boxes=100; then train.py: shuffle(512), batch(8), map(transform_images,
transform_targets) without parallelism, prefetch(AUTOTUNE); transform_targets: the best
of 9 anchors per box by IoU, then per output scale (13, 26, 52) the tf.function
transform_targets_for_output: a Python-style double loop over images and boxes (autograph
tf.range loops, tf.cond per box, TensorArray writes) and one tensor_scatter_nd_update).
The records are written as tools/voc2012.py writes them.

Flaw: the parse (and JPEG decode and resize) runs one record at a time with no
parallelism, before a shuffle of 512 decoded 416x416 float images; the targets are built
by a loop over every box slot of the batch (8 x 100 iterations per scale), in a sequential
map.
Twin: the serialized records shuffled (the same buffer), parsed in a parallel map, batched,
the targets built with vectorized ops (tf.where over the valid boxes, one scatter per
scale) in a parallel map, prefetch.
Compared: one epoch, ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from ._shared import count, picture, reused, write_tfrecords

SOURCE = "zzh8829/yolov3-tf2 yolov3_tf2/dataset.py, train.py (YOLOv3 on PASCAL VOC TFRecords)"
FORMAT = "TFRecord of tf.train.Example (JPEG, variable-length boxes and class names)"
KIND = "detection"
FLAW = "sequential parse+decode before a shuffle; targets by a per-box loop, sequential map"
TWIN = "shuffle records, parallel parse, vectorized targets in a parallel map, prefetch"
BATCH_SIZE = 8
# VOC 2012's 5,717 training images (about 500x375 pixels, 2.4 objects each).
FULL = 5_717
SIZE = 416
YOLO_MAX_BOXES = 100
CLASS_NAMES = ["aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair"]
CLASS_NAMES += ["cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant"]
CLASS_NAMES += ["sheep", "sofa", "train", "tvmonitor"]
yolo_anchors = (
    np.array(
        [(10, 13), (16, 30), (33, 23), (30, 61), (62, 45), (59, 119), (116, 90), (156, 198)]
        + [(373, 326)],
        np.float32,
    )
    / 416
)
yolo_anchor_masks = np.array([[6, 7, 8], [3, 4, 5], [0, 1, 2]])


def make_data(dir: str, size: str = "small") -> None:
    n = count(size, 32, FULL)
    rng = np.random.default_rng(24)
    (Path(dir) / "voc2012.names").write_text("\n".join(CLASS_NAMES) + "\n")

    key, pool = reused(size), {}

    def examples():
        for i in range(n):
            if key(i) not in pool:
                if size == "full":
                    h, w = int(rng.integers(330, 500)), int(rng.integers(375, 500))
                else:
                    h, w = int(rng.integers(80, 120)), int(rng.integers(100, 140))
                pool[key(i)] = tf.io.encode_jpeg(picture(rng, h, w, tint=i)).numpy()
            jpeg = pool[key(i)]
            k = int(min(1 + rng.poisson(1.4), 40))
            bw, bh = rng.uniform(0.03, 0.95, k), rng.uniform(0.03, 0.95, k)
            x0, y0 = rng.uniform(0, 1 - bw), rng.uniform(0, 1 - bh)
            yield {
                "image/encoded": [jpeg],
                "image/object/bbox/xmin": x0.astype(np.float32).tolist(),
                "image/object/bbox/ymin": y0.astype(np.float32).tolist(),
                "image/object/bbox/xmax": (x0 + bw).astype(np.float32).tolist(),
                "image/object/bbox/ymax": (y0 + bh).astype(np.float32).tolist(),
                "image/object/class/text": [CLASS_NAMES[c] for c in rng.integers(0, 20, k)],
            }

    write_tfrecords(str(Path(dir) / "voc2012_train-%d-of-%d.tfrecord"), examples(), 1)


# ---- yolov3_tf2/dataset.py ------------------------------------------------------------------
@tf.function
def transform_targets_for_output(y_true, grid_size, anchor_idxs):
    # y_true: (N, boxes, (x1, y1, x2, y2, class, best_anchor))
    N = tf.shape(y_true)[0]
    # y_true_out: (N, grid, grid, anchors, [x1, y1, x2, y2, obj, class])
    y_true_out = tf.zeros((N, grid_size, grid_size, tf.shape(anchor_idxs)[0], 6))
    anchor_idxs = tf.cast(anchor_idxs, tf.int32)
    indexes = tf.TensorArray(tf.int32, 1, dynamic_size=True)
    updates = tf.TensorArray(tf.float32, 1, dynamic_size=True)
    idx = 0
    for i in tf.range(N):
        for j in tf.range(tf.shape(y_true)[1]):
            if tf.equal(y_true[i][j][2], 0):
                continue
            anchor_eq = tf.equal(anchor_idxs, tf.cast(y_true[i][j][5], tf.int32))
            if tf.reduce_any(anchor_eq):
                box = y_true[i][j][0:4]
                box_xy = (y_true[i][j][0:2] + y_true[i][j][2:4]) / 2
                anchor_idx = tf.cast(tf.where(anchor_eq), tf.int32)
                grid_xy = tf.cast(box_xy // (1 / grid_size), tf.int32)
                # grid[y][x][anchor] = (tx, ty, bw, bh, obj, class)
                indexes = indexes.write(idx, [i, grid_xy[1], grid_xy[0], anchor_idx[0][0]])
                updates = updates.write(idx, [box[0], box[1], box[2], box[3], 1, y_true[i][j][4]])
                idx += 1
    return tf.tensor_scatter_nd_update(y_true_out, indexes.stack(), updates.stack())


def _with_best_anchor(y_train, anchors):
    anchors = tf.cast(anchors, tf.float32)
    anchor_area = anchors[..., 0] * anchors[..., 1]
    box_wh = y_train[..., 2:4] - y_train[..., 0:2]
    box_wh = tf.tile(tf.expand_dims(box_wh, -2), (1, 1, tf.shape(anchors)[0], 1))
    box_area = box_wh[..., 0] * box_wh[..., 1]
    intersection = tf.minimum(box_wh[..., 0], anchors[..., 0]) * tf.minimum(
        box_wh[..., 1], anchors[..., 1]
    )
    iou = intersection / (box_area + anchor_area - intersection)
    anchor_idx = tf.cast(tf.argmax(iou, axis=-1), tf.float32)
    anchor_idx = tf.expand_dims(anchor_idx, axis=-1)
    return tf.concat([y_train, anchor_idx], axis=-1)


def transform_targets(y_train, anchors, anchor_masks, size):
    y_outs = []
    grid_size = size // 32
    y_train = _with_best_anchor(y_train, anchors)
    for anchor_idxs in anchor_masks:
        y_outs.append(transform_targets_for_output(y_train, grid_size, anchor_idxs))
        grid_size *= 2
    return tuple(y_outs)


def transform_images(x_train, size):
    x_train = tf.image.resize(x_train, (size, size))
    x_train = x_train / 255
    return x_train


IMAGE_FEATURE_MAP = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/object/bbox/xmin": tf.io.VarLenFeature(tf.float32),
    "image/object/bbox/ymin": tf.io.VarLenFeature(tf.float32),
    "image/object/bbox/xmax": tf.io.VarLenFeature(tf.float32),
    "image/object/bbox/ymax": tf.io.VarLenFeature(tf.float32),
    "image/object/class/text": tf.io.VarLenFeature(tf.string),
}


def parse_tfrecord(tfrecord, class_table, size):
    x_train, y_train = parse_image_and_boxes(tfrecord, class_table, size)
    paddings = [[0, YOLO_MAX_BOXES - tf.shape(y_train)[0]], [0, 0]]
    y_train = tf.pad(y_train, paddings)
    return x_train, y_train


def parse_image_and_boxes(tfrecord, class_table, size):
    """The source's parse_tfrecord up to its padding (the ragged path keeps the boxes)."""
    x = tf.io.parse_single_example(tfrecord, IMAGE_FEATURE_MAP)
    x_train = tf.image.decode_jpeg(x["image/encoded"], channels=3)
    x_train = tf.image.resize(x_train, (size, size))
    class_text = tf.sparse.to_dense(x["image/object/class/text"], default_value="")
    labels = tf.cast(class_table.lookup(class_text), tf.float32)
    y_train = tf.stack(
        [
            tf.sparse.to_dense(x["image/object/bbox/xmin"]),
            tf.sparse.to_dense(x["image/object/bbox/ymin"]),
            tf.sparse.to_dense(x["image/object/bbox/xmax"]),
            tf.sparse.to_dense(x["image/object/bbox/ymax"]),
            labels,
        ],
        axis=1,
    )
    return x_train, y_train


def _class_table(class_file):
    LINE_NUMBER = -1  # TODO: use tf.lookup.TextFileIndex.LINE_NUMBER
    return tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(
            class_file, tf.string, 0, tf.int64, LINE_NUMBER, delimiter="\n"
        ),
        -1,
    )


def load_tfrecord_dataset(file_pattern, class_file, size=416):
    class_table = _class_table(class_file)
    files = tf.data.Dataset.list_files(file_pattern)
    dataset = files.flat_map(tf.data.TFRecordDataset)
    return dataset.map(lambda x: parse_tfrecord(x, class_table, size))


# ---- train.py -------------------------------------------------------------------------------
def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    anchors, anchor_masks = yolo_anchors, yolo_anchor_masks
    train_dataset = load_tfrecord_dataset(
        str(Path(dir) / "voc2012_train*.tfrecord"), str(Path(dir) / "voc2012.names"), SIZE
    )
    train_dataset = train_dataset.shuffle(buffer_size=512)
    train_dataset = train_dataset.batch(batch_size)
    train_dataset = train_dataset.map(
        lambda x, y: (
            transform_images(x, SIZE),
            transform_targets(y, anchors, anchor_masks, SIZE),
        )
    )
    return train_dataset.prefetch(buffer_size=tf.data.AUTOTUNE)


# ---- the hand-tuned twin --------------------------------------------------------------------
def _targets_for_output(y_true, grid_size, anchor_idxs):
    """transform_targets_for_output without the loop: the same scatter (its indexes in the
    loop's order, so a later box in the same cell wins as before)."""
    n = tf.shape(y_true)[0]
    out = tf.zeros((n, grid_size, grid_size, len(anchor_idxs), 6))
    anchor_eq = tf.equal(
        tf.constant(anchor_idxs, tf.int32)[None, None, :], tf.cast(y_true[..., 5:6], tf.int32)
    )
    chosen = tf.logical_and(tf.not_equal(y_true[..., 2], 0), tf.reduce_any(anchor_eq, axis=-1))
    where = tf.cast(tf.where(chosen), tf.int32)  # (M, 2): image, box, in row-major order
    boxes = tf.gather_nd(y_true, where)
    anchor = tf.argmax(
        tf.cast(tf.gather_nd(anchor_eq, where), tf.int32), axis=-1, output_type=tf.int32
    )
    box_xy = (boxes[:, 0:2] + boxes[:, 2:4]) / 2
    grid_xy = tf.cast(box_xy // (1 / grid_size), tf.int32)
    indexes = tf.stack([where[:, 0], grid_xy[:, 1], grid_xy[:, 0], anchor], axis=1)
    ones = tf.ones_like(boxes[:, :1])
    updates = tf.concat([boxes[:, 0:4], ones, boxes[:, 4:5]], axis=1)
    return tf.tensor_scatter_nd_update(out, indexes, updates)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    class_table = _class_table(str(Path(dir) / "voc2012.names"))

    def targets(y):
        y = _with_best_anchor(y, yolo_anchors)
        sizes = [SIZE // 32 * 2**k for k in range(3)]
        masks = yolo_anchor_masks.tolist()
        return tuple(_targets_for_output(y, g, m) for g, m in zip(sizes, masks, strict=True))

    files = tf.data.Dataset.list_files(str(Path(dir) / "voc2012_train*.tfrecord"))
    ds = files.flat_map(tf.data.TFRecordDataset).shuffle(512)
    ds = ds.map(lambda r: parse_tfrecord(r, class_table, SIZE), num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.batch(batch_size)
    ds = ds.map(
        lambda x, y: (transform_images(x, SIZE), targets(y)), num_parallel_calls=tf.data.AUTOTUNE
    )
    return ds.prefetch(tf.data.AUTOTUNE)


def model() -> keras.Model:
    """A small stand-in for YoloV3 with the same three outputs (13, 26 and 52 cells, 3
    anchors, 6 values) and a mean squared error per output in place of YoloLoss."""
    inputs = keras.Input(shape=(SIZE, SIZE, 3))
    x52 = keras.layers.Conv2D(8, 3, strides=8, padding="same", activation="relu")(inputs)
    x26 = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x52)
    x13 = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x26)
    outputs = [
        keras.layers.Reshape((g, g, 3, 6))(keras.layers.Conv2D(18, 1)(x))
        for g, x in ((13, x13), (26, x26), (52, x52))
    ]
    m = keras.Model(inputs, outputs)
    m.compile(optimizer="adam", loss=["mse", "mse", "mse"])
    return m
