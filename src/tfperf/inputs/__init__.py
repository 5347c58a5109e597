"""The run file's data turned into datasets: built-in workloads' data made on demand,
tuned or original pipelines, or a user's own `module:function` pipeline."""
