"""Reading: the tf.data pipeline's graph as a chain of stages (read.py), the questions asked
of it (lint.py: a prefix as a dataset, the deterministic prefix, float64 outputs), and the
user's `data.pipeline` function's source, for file:line (user_source.py). Nothing runs."""
