"""Edits of a tf.data.Dataset's graph that --fix tries: batch before a map, determinism,
options, float32 (edits.py); parallel reads, maps and batch, the shuffle cap, the cache moved
before a random stage (io.py); the costly deterministic work cached (cache.py); per-example
maps vectorized (vectorize.py, with pfor_fn.py). They time nothing and decide nothing."""
