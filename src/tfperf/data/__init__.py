"""The data layer: raw rows -> sharded TFRecord + manifest (`convert`, convert/) and shards
-> a tuned tf.data pipeline (`make_dataset`, pipeline.py); no training and no measuring."""
