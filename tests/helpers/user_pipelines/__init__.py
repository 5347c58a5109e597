"""Users' slow tf.data pipelines and their hand-tuned twins: cases.py lists them."""
