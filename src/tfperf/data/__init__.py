"""The data layer: raw rows -> sharded TFRecord + manifest (`convert`, writer.py) and shards
-> a tuned tf.data pipeline (`make_dataset`, pipeline.py); no training and no measuring."""
