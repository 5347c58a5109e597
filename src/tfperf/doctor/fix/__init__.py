"""`tfperf doctor --fix`: its entry (entry.py), the run file's changes (runfile.py) or a
dataset's rewrites (dataset.py) tried one by one against the best so far (trials.py), the
gain each was expected to give (predicted.py), and what is written for a `data.pipeline`
function (pipeline_file.py)."""
