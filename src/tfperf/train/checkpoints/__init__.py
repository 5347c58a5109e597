"""A training run's checkpoints: `save` (the tf.train.Checkpoint, its manager and the hook
that saves every S steps or T seconds, on SIGTERM/SIGINT and at the end), `folder` (a
run's folders and the checkpoints folder read without TensorFlow: finished checkpoints,
the FINAL marker), `damaged` (a checkpoint that no longer reads, moved aside and skipped),
`held` (the files hard-linked while the evaluator uses them), `stale` (temporaries a killed
process left, removed at start) and `disk_full` (a full disk while saving, named once)."""
