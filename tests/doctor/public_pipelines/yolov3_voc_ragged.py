"""PASCAL VOC detection TFRecords with the boxes kept ragged, YOLOv3's --use_ragged_dataset path.

Source: zzh8829/yolov3-tf2 yolov3_tf2/ragged_dataset.py and train.py with
--use_ragged_dataset (parse_tfrecord as in dataset.py but the boxes become a RaggedTensor
of one row, RaggedTensor.from_row_splits(y_train, [0, n]), instead of being padded to
100; train.py: shuffle(512), batch(8, drop_remainder=True), map(transform_images,
transform_targets) without parallelism, prefetch; transform_targets: merge_dims(1, 2),
IoU with the 9 anchors on the ragged boxes, the best anchor per box by a Python loop over
the batch's rows ("tf.ragged.argmax is not ready"), tf.ragged.stack; per scale the
tf.function transform_targets_for_output: an autograph double loop over the rows and each
row's boxes, TensorArray writes, one tensor_scatter_nd_update). The same records as
yolov3_voc_tfrecord.

Flaw: as yolov3_voc_tfrecord (a sequential parse before a shuffle of decoded images, a
per-box loop in a sequential map), with ragged boxes through the shuffle and the batch.
Twin: yolov3_voc_tfrecord's twin (records shuffled, parsed in parallel, vectorized targets:
the grids are the same whether the boxes travelled ragged or padded).
Compared: one epoch (32 records: no partial batch is dropped), ignoring order.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from . import yolov3_voc_tfrecord as padded
from .yolov3_voc_tfrecord import FULL, make_data, model  # noqa: F401  (the same data and model)

SOURCE = "zzh8829/yolov3-tf2 yolov3_tf2/ragged_dataset.py, train.py --use_ragged_dataset"
FORMAT = "TFRecord of tf.train.Example (JPEG, variable-length boxes kept ragged)"
KIND = "detection"
FLAW = "sequential parse to ragged boxes, per-row and per-box loops in a sequential map"
TWIN = "shuffle records, parallel parse, vectorized targets in a parallel map, prefetch"
BATCH_SIZE = 8
SIZE = padded.SIZE


@tf.function
def transform_targets_for_output(y_true, grid_size, anchor_idxs):
    # y_true: (batch_size, (nbboxes), (x1, y1, x2, y2, class, best_anchor))
    N = y_true.nrows()
    y_true_out = tf.zeros((N, grid_size, grid_size, tf.shape(anchor_idxs)[0], 6))
    anchor_idxs = tf.cast(anchor_idxs, tf.int32)
    indexes = tf.TensorArray(tf.int32, 1, dynamic_size=True)
    updates = tf.TensorArray(tf.float32, 1, dynamic_size=True)
    idx = 0
    for i in tf.range(N):
        for j in tf.range(y_true[i].nrows()):
            anchor_eq = tf.equal(anchor_idxs, tf.cast(y_true[i][j][5], tf.int32))
            if tf.reduce_any(anchor_eq):
                box = y_true[i][j][0:4]
                box_xy = (y_true[i][j][0:2] + y_true[i][j][2:4]) / 2
                anchor_idx = tf.cast(tf.where(anchor_eq), tf.int32)
                grid_xy = tf.cast(box_xy // (1 / grid_size), tf.int32)
                indexes = indexes.write(idx, [i, grid_xy[1], grid_xy[0], anchor_idx[0][0]])
                updates = updates.write(idx, [box[0], box[1], box[2], box[3], 1, y_true[i][j][4]])
                idx += 1
    return tf.tensor_scatter_nd_update(y_true_out, indexes.stack(), updates.stack())


def transform_targets(y_train, anchors, anchor_masks, size, batch_size):
    y_outs = []
    grid_size = size // 32
    y_train = y_train.merge_dims(1, 2)
    anchors = tf.cast(anchors, tf.float32)
    anchor_area = anchors[..., 0] * anchors[..., 1]
    box_wh = y_train[..., 2:4] - y_train[..., 0:2]
    box_wh = tf.tile(tf.expand_dims(box_wh, -2), (1, 1, tf.shape(anchors)[0], 1))
    box_area = box_wh[..., 0] * box_wh[..., 1]
    intersection = tf.minimum(box_wh[..., 0], anchors[..., 0]) * tf.minimum(
        box_wh[..., 1], anchors[..., 1]
    )
    iou = intersection / (box_area + anchor_area - intersection)
    # tf.ragged.argmax is not ready, some dirty code
    anchor_idx_list = []
    for row_index in range(batch_size):  # FLAGS.batch_size
        iou_single = iou[row_index]
        anchor_idx = tf.cast(tf.argmax(iou_single, axis=-1), tf.float32)
        anchor_idx = tf.expand_dims(anchor_idx, axis=-1)
        anchor_idx_list.append(anchor_idx)
    anchor_idx = tf.ragged.stack(anchor_idx_list)
    y_train = tf.concat([y_train, anchor_idx], axis=-1)
    for anchor_idxs in anchor_masks:
        y_outs.append(transform_targets_for_output(y_train, grid_size, anchor_idxs))
        grid_size *= 2
    return tuple(y_outs)


def parse_tfrecord(tfrecord, class_table, size):
    x_train, y_train = padded.parse_image_and_boxes(tfrecord, class_table, size)
    y_train = tf.RaggedTensor.from_row_splits(y_train, [0, tf.shape(y_train)[0]])
    return x_train, y_train


def load_tfrecord_dataset(file_pattern, class_file, size=416):
    class_table = padded._class_table(class_file)
    files = tf.data.Dataset.list_files(file_pattern)
    dataset = files.flat_map(tf.data.TFRecordDataset)
    return dataset.map(lambda x: parse_tfrecord(x, class_table, size))


def original(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    anchors, anchor_masks = padded.yolo_anchors, padded.yolo_anchor_masks
    train_dataset = load_tfrecord_dataset(
        str(Path(dir) / "voc2012_train*.tfrecord"), str(Path(dir) / "voc2012.names"), SIZE
    )
    train_dataset = train_dataset.shuffle(buffer_size=512)
    train_dataset = train_dataset.batch(batch_size, drop_remainder=True)
    train_dataset = train_dataset.map(
        lambda x, y: (
            padded.transform_images(x, SIZE),
            transform_targets(y, anchors, anchor_masks, SIZE, batch_size),
        )
    )
    return train_dataset.prefetch(buffer_size=tf.data.AUTOTUNE)


def tuned(dir: str, batch_size: int = BATCH_SIZE) -> tf.data.Dataset:
    return padded.tuned(dir, batch_size)
